
local v = redis.call("GET", KEYS[1])
if v then
  local n, bad = ts(v)
  if not n then return {bad, now, v} end
  if n >= now then return {0, now, v} end
end
return {1, now, write(now + tonumber(ARGV[2]) + 1)}

local e = redis.call("GET", KEYS[2])
if not e then
  local t = redis.call("TIME")
  e = t[1] .. "." .. t[2] .. "." .. ARGV[1]
  redis.call("SET", KEYS[2], e)
else
  local s, u = string.match(e, "^(%d+)%.(%d+)%.")
  if not s or #s > 18 or #u > 18 then return {-1, string.sub(e, 1, 256)} end
end
local r = 0
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then r = 1 end
if e == ARGV[3] then return r end
local t = redis.call("TIME")
return {r, e, t[1], t[2]}
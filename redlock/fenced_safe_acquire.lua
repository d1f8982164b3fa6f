local e = redis.call("GET", KEYS[2])
if e then
  local s, u = string.match(e, "^(%d+)%.(%d+)%.")
  if not s or #s > 18 or #u > 18 then return {-1, string.sub(e, 1, 256)} end
end
local r, c, write, applied = 0, nil, false, 0
if redis.call("TYPE", KEYS[1])["ok"] == "none" then
  c = fence_read(KEYS[3])
  if c and c < 0 then return c end
  write = not c
  local now
  if write then
    now = fence_clock()
    c = fence_seed(now)
    if c >= 9007199254740991 then return -2 end
  end
  local g = tonumber(ARGV[4])
  if fence_guess(c, g, now) then c, applied, write = g, 1, true end
  r = 1
end
if not e then
  local t = redis.call("TIME")
  e = t[1] .. "." .. t[2] .. "." .. ARGV[1]
  redis.call("SET", KEYS[2], e)
end
if r == 1 then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  if write then redis.call("SET", KEYS[3], string.format("%.0f", c), "PX", ARGV[5]) end
end
if e == ARGV[3] then
  if r == 1 then return {1, c, applied} end
  return 0
end
local t = redis.call("TIME")
if r == 1 then return {1, e, t[1], t[2], c, applied} end
return {0, e, t[1], t[2]}

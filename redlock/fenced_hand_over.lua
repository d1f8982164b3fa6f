local released = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) released = 1 end
if redis.call("TYPE", KEYS[1])["ok"] ~= "none" then return {released, 0} end
local c = fence_read(KEYS[2])
if c and c < 0 then return {released, c} end
local write, now = not c, nil
if write then
  now = fence_clock()
  c = fence_seed(now)
  if c >= 9007199254740991 then return {released, -2} end
end
local g, applied = tonumber(ARGV[4]), 0
if fence_guess(c, g, now) then c, applied, write = g, 1, true end
redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
if write then redis.call("SET", KEYS[2], string.format("%.0f", c), "PX", ARGV[5]) end
return {released, 1, c, applied}

local held = redis.call("TYPE", KEYS[1])["ok"]
if held == "string" then return 0 end
if held ~= "none" then return -4 end
local c = fence_read(KEYS[2])
if c and c < 0 then return c end
local write, now = not c, nil
if write then
  now = fence_clock()
  c = fence_seed(now)
  if c >= 9007199254740991 then return -2 end
end
local g, applied = tonumber(ARGV[3]), 0
if fence_guess(c, g, now) then c, applied, write = g, 1, true end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
if write then redis.call("SET", KEYS[2], string.format("%.0f", c), "PX", ARGV[4]) end
return {1, c, applied}

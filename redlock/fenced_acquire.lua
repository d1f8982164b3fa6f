local held = redis.call("TYPE", KEYS[1])["ok"]
if held == "string" then return 0 end
if held ~= "none" then return -4 end
local c = fence_read(KEYS[2])
if c and c < 0 then return c end
local seed = not c
if seed then
  c = fence_clock()
  if c >= 9007199254740991 then return -2 end
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
if seed then redis.call("SET", KEYS[2], string.format("%.0f", c)) end
return {1, c}

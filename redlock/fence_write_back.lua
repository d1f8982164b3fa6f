local c = fence_read(KEYS[1])
if c and c < 0 then return c end
local v = tonumber(ARGV[1])
if not c then
  c = fence_seed(fence_clock())
  if c >= v then
    redis.call("SET", KEYS[1], string.format("%.0f", c), "PX", ARGV[2])
    return 0
  end
end
if c < v then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
return 0

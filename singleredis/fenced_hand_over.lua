local released = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) released = 1 end
if redis.call("EXISTS", KEYS[1]) == 1 then return {released, 0} end
local fence = next_fence(KEYS[2])
if fence < 0 then return {released, fence} end
redis.call("SET", KEYS[2], string.format("%.0f", fence), "PX", ARGV[4])
redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
return {released, fence}
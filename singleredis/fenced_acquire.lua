local held = redis.call("TYPE", KEYS[1])["ok"]
if held == "string" then return 0 end
if held ~= "none" then return -4 end
local fence = next_fence(KEYS[2])
if fence < 0 then return fence end
redis.call("SET", KEYS[2], string.format("%.0f", fence), "PX", ARGV[3])
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return fence

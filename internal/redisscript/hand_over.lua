local released = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) released = 1 end
if redis.call("SET", KEYS[1], ARGV[2], "NX", "PX", ARGV[3]) then return {released, 1} end
return {released, 0}
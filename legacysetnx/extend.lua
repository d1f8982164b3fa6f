
local v = redis.call("GET", KEYS[1])
if v ~= ARGV[5] then return {0, now, v or ""} end
local n = ts(v)
if not n or n < now then return {0, now, v} end
return {1, now, write(now + tonumber(ARGV[2]) + 1)}

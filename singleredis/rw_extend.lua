local f, field, e, now = rw_own(KEYS[1], ARGV[1], ARGV[3])
if not f or e <= now then return 0 end
local exp = now + tonumber(ARGV[2])
redis.call("PEXPIRE", KEYS[1], math.max(exp, rw_last(f, field, now)) - now)
if field == "w" then field = "we" end
redis.call("HSET", KEYS[1], field, string.format("%.0f", exp))
return 1

local f, s, now = permit_own(KEYS[1], ARGV[1])
if not f then return 0 end
local e = tonumber(f["e" .. s])
if not e or e <= now then return 0 end
local exp = now + tonumber(ARGV[2])
redis.call("PEXPIRE", KEYS[1], math.max(exp, permit_last(f, s, now)) - now)
redis.call("HSET", KEYS[1], "e" .. s, string.format("%.0f", exp))
return 1

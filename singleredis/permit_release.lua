local f, s, now = permit_own(KEYS[1], ARGV[1])
if not f then return 0 end
local e = tonumber(f["e" .. s])
local last = permit_last(f, s, now)
if last == 0 then
  redis.call("DEL", KEYS[1])
else
  redis.call("PEXPIRE", KEYS[1], last - now)
  redis.call("HDEL", KEYS[1], "t" .. s, "e" .. s)
end
if e and e > now then return 1 end
return 0

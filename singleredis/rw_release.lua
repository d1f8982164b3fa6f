local f, field, e, now = rw_own(KEYS[1], ARGV[1], ARGV[2])
if not f then return 0 end
local last = rw_last(f, field, now)
if last == 0 then
  redis.call("DEL", KEYS[1])
elseif field == "w" then
  redis.call("PEXPIRE", KEYS[1], last - now)
  redis.call("HDEL", KEYS[1], "w", "we")
else
  redis.call("PEXPIRE", KEYS[1], last - now)
  redis.call("HDEL", KEYS[1], field)
end
if e > now then return 1 end
return 0

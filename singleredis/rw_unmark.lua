if redis.call("TYPE", KEYS[1])["ok"] ~= "hash" then return 0 end
local now = permit_now()
local f = rw_fields(KEYS[1])
if not f or not f.q[ARGV[1]] then return 0 end
local field = "q:" .. ARGV[1]
local last = rw_last(f, field, now)
if last == 0 then
  redis.call("DEL", KEYS[1])
else
  redis.call("PEXPIRE", KEYS[1], last - now)
  redis.call("HDEL", KEYS[1], field)
end
return 1

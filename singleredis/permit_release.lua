if redis.call("TYPE", KEYS[1])["ok"] ~= "hash" then return 0 end
local now = permit_now()
local f = permit_fields(KEYS[1])
local s = permit_slot(f, ARGV[1])
if not s then return 0 end
local e = tonumber(f["e" .. s])
local live = 0
for o = 0, (tonumber(f["limit"]) or 0) - 1 do
  local oe = tonumber(f["e" .. o])
  if o ~= s and f["t" .. o] and oe and oe > now then live = live + 1 end
end
if live == 0 then
  redis.call("DEL", KEYS[1])
else
  redis.call("HDEL", KEYS[1], "t" .. s, "e" .. s)
end
if e and e > now then return 1 end
return 0

local typ = redis.call("TYPE", KEYS[1])["ok"]
if typ == "string" then return {-5, 0, 0} end
if typ ~= "hash" and typ ~= "none" then return {-4, 0, 0} end
local limit = tonumber(ARGV[3])
local now = permit_now()
local f = permit_fields(KEYS[1])
if typ == "hash" and not f then return {-4, 0, 0} end
local cur, free, last = nil, nil, 0
if f then
  cur = f.n
  last = permit_last(f, -1, now)
  for s = 0, cur - 1 do
    local e = tonumber(f["e" .. s])
    if not (f["t" .. s] and e and e > now) then
      free = s
      break
    end
  end
  if cur ~= limit and last > 0 then return {-6, cur, 0} end
end
local fresh = cur ~= limit
if fresh then free = 0 end
if not free then return {0, cur, 0} end
local fence = 0
if ARGV[4] ~= "0" then
  fence = next_fence(KEYS[2])
  if fence < 0 then return {fence, 0, 0} end
end
local exp = now + tonumber(ARGV[2])
local pttl = math.max(exp, last) - now
redis.call("PEXPIRE", KEYS[1], pttl)
if ARGV[4] ~= "0" then
  redis.call("SET", KEYS[2], string.format("%.0f", fence), "PX", ARGV[4])
end
if fresh and typ == "hash" then redis.call("DEL", KEYS[1]) end
redis.call("HSET", KEYS[1], "limit", ARGV[3], "t" .. free, ARGV[1], "e" .. free, string.format("%.0f", exp))
if fresh then redis.call("PEXPIRE", KEYS[1], pttl) end
return {1, free, fence}

local typ = redis.call("TYPE", KEYS[1])["ok"]
if typ == "string" then return {-5, 0, 0} end
if typ ~= "hash" and typ ~= "none" then return {-4, 0, 0} end
local now = permit_now()
-- HGETALL runs on a new key too, so that a user without the right is
-- refused here rather than holding what it cannot release.
local f, sem = rw_fields(KEYS[1])
if not f then
  if sem then return {-6, 0, 0} end
  return {-4, 0, 0}
end
local wlive = f.w and f.we > now
local readers = 0
for _, e in pairs(f.r) do
  if e > now then readers = readers + 1 end
end
local last = rw_last(f, "", now)
local dead = rw_dead(f, now)
if ARGV[3] == "r" then
  if wlive then
    rw_hdel(KEYS[1], dead)
    return {0, 1, 0}
  end
  for _, e in pairs(f.q) do
    if e > now then
      rw_hdel(KEYS[1], dead)
      return {0, 2, 0}
    end
  end
elseif wlive or readers > 0 then
  local wait = tonumber(ARGV[5])
  rw_hdel(KEYS[1], dead)
  if ARGV[4] ~= "" and wait > 0 then
    local u = now + wait
    redis.call("PEXPIRE", KEYS[1], math.max(u, last) - now)
    redis.call("HSET", KEYS[1], "q:" .. ARGV[4], string.format("%.0f", u))
  end
  if wlive then return {0, 1, 0} end
  return {0, 3, readers}
end
local fence = 0
if ARGV[6] ~= "0" then
  fence = next_fence(KEYS[2])
  if fence < 0 then return {fence, 0, 0} end
end
local exp = now + tonumber(ARGV[2])
local pttl = math.max(exp, last) - now
redis.call("PEXPIRE", KEYS[1], pttl)
if ARGV[6] ~= "0" then
  redis.call("SET", KEYS[2], string.format("%.0f", fence), "PX", ARGV[6])
end
if ARGV[3] == "w" and f.q[ARGV[4]] and f.q[ARGV[4]] > now then dead[#dead + 1] = "q:" .. ARGV[4] end
rw_hdel(KEYS[1], dead)
if ARGV[3] == "r" then
  redis.call("HSET", KEYS[1], "r:" .. ARGV[1], string.format("%.0f", exp))
else
  redis.call("HSET", KEYS[1], "w", ARGV[1], "we", string.format("%.0f", exp))
end
redis.call("PEXPIRE", KEYS[1], pttl)
return {1, 0, fence}

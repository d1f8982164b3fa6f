-- ARGV: token, permit TTL (ms), registration TTL (ms), wake-up channel,
-- the most registrations the queue takes, the fence counter's life (ms;
-- "0" unfenced), limit. Serves the live waiters before us from free
-- slots, then takes a permit when one is free and nobody alive waits
-- before us (and serves the waiters after us from the slots still
-- free), otherwise registers us (or renews our registration) at the
-- queue's tail. Returns {status, a, b, now, slot}:
--   {1, fence, ttl, now, slot}: taken now;
--   {2, fence, ttl, now, slot}: it was handed to us already (renewed);
--   {0, head (1: we are the first live waiter), ms until the first live
--    permit expires (-1: none), now, 0}: wait;
--   {3, 0, 0, now, 0}: the queue is full: we are not registered;
--   {-4}: the key is not a semaphore; {-5}: it holds a mutex;
--   {-6, limit}: its permits are held with another limit; another
--   negative code: a fence code. Nothing of ours is written then.
local token, ttl, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[7])
pf_keep = ARGV[6]
local typ = redis.call("TYPE", KEYS[1])["ok"]
if typ == "string" then return {-5, 0, 0, 0, 0} end
if typ ~= "hash" and typ ~= "none" then return {-4, 0, 0, 0, 0} end
local now = permit_now()
local f = permit_fields(KEYS[1])
if typ == "hash" and not f then return {-4, 0, 0, now, 0} end
if f then
  local s = permit_slot(f, token)
  local e = s and tonumber(f["e" .. s])
  if e and e > now then
    -- Handed to us and not woken (a wake-up lost or refused): ours from
    -- now, for a whole TTL.
    local fence = pf_fence(token, s)
    if fence or not pf_fenced() then
      local exp = now + ttl
      redis.call("PEXPIRE", KEYS[1], math.max(exp, permit_last(f, s, now)) - now)
      redis.call("HSET", KEYS[1], "e" .. s, string.format("%.0f", exp))
      pf_unhand(token, s)
      redis.call("HDEL", KEYS[3], token) -- a registration left by a hand-over cut short
      return {2, fence or 0, ttl, now, s}
    end
    -- Its fence is lost: free the slot, and wait on as a new waiter.
    redis.call("HDEL", KEYS[1], "t" .. s, "e" .. s)
    f = permit_fields(KEYS[1])
  end
  if pf_free(f, limit, now) == false then return {-6, f.n, 0, now, 0} end
end
while true do
  local w = pf_first(now)
  if not w or w == token then break end
  local r = pf_hand(now)
  if r < 0 then return {r, 0, 0, now, 0} end
  if r == 0 then break end
end
local w = pf_first(now)
if not w or w == token then
  f = permit_fields(KEYS[1])
  local s = pf_free(f, limit, now)
  if s == false then return {-6, f.n, 0, now, 0} end
  if s then
    local fence = pf_take(f, s, token, ttl, limit, now)
    if fence < 0 then return {fence, 0, 0, now, 0} end
    if w then redis.call("LPOP", KEYS[2]) end
    redis.call("HDEL", KEYS[3], token)
    -- Slots still free (permits that expired together) go to the next
    -- waiters, who would otherwise wait for their next check.
    while pf_hand(now) == 1 do end
    return {1, fence, ttl, now, s}
  end
end
local reg = tonumber(ARGV[3])
local entry = "p" .. string.format("%.0f", now + reg) .. " " .. ARGV[2] .. " " .. ARGV[7] .. " " .. ARGV[4]
-- Alive: renewed in place, the queue still holds us. Otherwise new; or
-- renewed too late (our registration died, and the queue may have lost
-- us with its expiry); or handed a permit that expired before we found it
-- (the hand-over took us out): at the tail. An older entry of ours that
-- the queue still holds serves us first; the one left behind is dropped
-- when it reaches the head, as a dead one. HGET (pf_reg) and LINDEX
-- (pf_first, above) fail on keys of another type before anything is
-- written to them; the expiries come before the writes (a no-op on keys
-- that do not exist yet) and right after the HSET that may make the hash,
-- so that an ACL that refuses a command leaves no key without an expiry.
local live = pf_reg(token, now)
if not live and redis.call("HEXISTS", KEYS[3], token) == 0 and redis.call("HLEN", KEYS[3]) >= tonumber(ARGV[5]) then
  return {3, 0, 0, now, 0}
end
for i = 2, 3 do
  if redis.call("PTTL", KEYS[i]) < reg then redis.call("PEXPIRE", KEYS[i], reg) end
end
redis.call("HSET", KEYS[3], token, entry)
if not live then
  if redis.call("PTTL", KEYS[3]) < reg then redis.call("PEXPIRE", KEYS[3], reg) end
  redis.call("RPUSH", KEYS[2], token)
end
for i = 2, 3 do
  if redis.call("PTTL", KEYS[i]) < reg then redis.call("PEXPIRE", KEYS[i], reg) end
end
local head = 0
if pf_first(now) == token then head = 1 end
local first = -1
f = permit_fields(KEYS[1])
if f then
  for s = 0, f.n - 1 do
    local e = tonumber(f["e" .. s])
    if f["t" .. s] and e and e > now and (first < 0 or e - now < first) then first = e - now end
  end
end
return {0, head, first, now, 0}

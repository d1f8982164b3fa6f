-- ARGV: token, lock TTL (ms), registration TTL (ms), wake-up channel, the
-- most registrations the queue takes, the fence counter's life (ms).
-- Takes the lock when it is free and nobody alive waits before us,
-- otherwise registers us (or renews our registration) at the queue's tail.
-- Returns {status, a, b, now}:
--   {1, fence, ttl, now}: taken now;
--   {2, fence, ttl, now}: it was handed to us already (its TTL renewed);
--   {0, head (1: we are the first live waiter), the lock's PTTL, now}: wait;
--   {3, 0, 0, now}: the queue is full: we are not registered;
--   {-n, 0, 0, now}: fence code n, nothing written.
local token = ARGV[1]
fence_keep = ARGV[6]
local cur = redis.call("GET", KEYS[1])
local now = now_ms()
if cur == token then
  -- Handed to us and not woken (a wake-up lost or refused): the key is
  -- ours from now, for a whole TTL.
  -- Our queue entry, if any, has no registration left: prune skips it.
  redis.call("HDEL", KEYS[3], token)
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  local fence = 1
  if fenced() then fence = tonumber(redis.call("GET", KEYS[4])) or 0 end
  return {2, fence, tonumber(ARGV[2]), now}
end
if not cur then
  local w = prune(now)
  if not w or w == token then
    local fence = take(token, ARGV[2])
    if fence < 0 then return {fence, 0, 0, now} end
    if w then
      redis.call("LPOP", KEYS[2])
      redis.call("HDEL", KEYS[3], token)
    end
    return {1, fence, tonumber(ARGV[2]), now}
  end
  local fence = hand(now)
  if fence < 0 then return {fence, 0, 0, now} end
end
local reg = tonumber(ARGV[3])
local entry = (now + reg) .. " " .. ARGV[2] .. " " .. ARGV[4]
-- HEXISTS and LINDEX fail on keys of another type before anything is
-- written. The expiries come before the writes (a no-op on keys that do
-- not exist yet) and right after the HSET that may make the hash, so that
-- an ACL that refuses a command leaves no key without an expiry.
local exists = redis.call("HEXISTS", KEYS[3], token) == 1
if not exists and redis.call("HLEN", KEYS[3]) >= tonumber(ARGV[5]) then return {3, 0, 0, now} end
redis.call("LINDEX", KEYS[2], 0)
for i = 2, 3 do
  if redis.call("PTTL", KEYS[i]) < reg then redis.call("PEXPIRE", KEYS[i], reg) end
end
redis.call("HSET", KEYS[3], token, entry)
if not exists then
  if redis.call("PTTL", KEYS[3]) < reg then redis.call("PEXPIRE", KEYS[3], reg) end
  redis.call("RPUSH", KEYS[2], token)
end
for i = 2, 3 do
  if redis.call("PTTL", KEYS[i]) < reg then redis.call("PEXPIRE", KEYS[i], reg) end
end
local head = 0
if prune(now) == token then head = 1 end
return {0, head, redis.call("PTTL", KEYS[1]), now}

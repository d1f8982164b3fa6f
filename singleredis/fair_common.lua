-- KEYS: the lock key, the queue (a list of waiters' tokens, in arrival
-- order), the registrations (a hash: token -> "expiry ttl channel", expiry
-- in the server's milliseconds), and with fencing the fence counter; all in
-- one hash slot.
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function fenced() return #KEYS >= 4 end
-- registration(w, now) returns w's TTL and channel when w's registration is
-- alive at now, nil otherwise.
local function registration(w, now)
  local e = redis.call("HGET", KEYS[3], w)
  if not e then return nil end
  local x, ttl, ch = string.match(e, "^(%d+) (%d+) (.*)$")
  if not x or tonumber(x) <= now then return nil end
  return ttl, ch
end
-- prune(now) drops the dead registrations at the queue's head and returns
-- the first live waiter with its TTL and channel (nil: nobody waits).
local function prune(now)
  while true do
    local w = redis.call("LINDEX", KEYS[2], 0)
    if not w then return nil end
    local ttl, ch = registration(w, now)
    if ttl then return w, ttl, ch end
    redis.call("LPOP", KEYS[2])
    redis.call("HDEL", KEYS[3], w)
  end
end
-- fence_keep is how long (ms) the fence counter lives after the last fence
-- it gave: each script that may take the lock sets it from its ARGV.
local fence_keep
-- take(w, ttl) sets the free lock key to w for ttl ms and returns the fence
-- (1 without fencing), or a negative fence code with nothing written.
local function take(w, ttl)
  local fence = 1
  if fenced() then
    fence = next_fence(KEYS[4])
    if fence < 0 then return fence end
    redis.call("SET", KEYS[4], string.format("%.0f", fence), "PX", fence_keep)
  end
  redis.call("SET", KEYS[1], w, "PX", ttl)
  return fence
end
-- wake_refused is set to 1 when hand's PUBLISH was refused (an ACL without
-- PUBLISH on the wake-up channel): the key was handed over all the same,
-- and the waiter finds it at its next check.
local wake_refused = 0
-- hand(now) gives the free lock key to the first live waiter, removes it
-- from the queue and wakes it on its channel with "token fence now".
-- It returns the fence given (0: nobody waits; < 0: a fence code).
local function hand(now)
  local w, ttl, ch = prune(now)
  if not w then return 0 end
  local fence = take(w, ttl)
  if fence < 0 then return fence end
  redis.call("LPOP", KEYS[2])
  redis.call("HDEL", KEYS[3], w)
  local p = redis.pcall("PUBLISH", ch, w .. " " .. string.format("%.0f", fence) .. " " .. now)
  if type(p) == "table" and p.err then wake_refused = 1 end
  return fence
end

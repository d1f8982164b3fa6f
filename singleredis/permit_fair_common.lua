-- The fair wait of permits. KEYS: the semaphore's hash, the fair queue (a
-- list of waiters' tokens in arrival order) and the registrations (a hash)
-- that the key's mutex would use, and with fencing the fence counter. A
-- permit waiter's registration is "p<expiry> <ttl> <limit> <channel>"
-- (expiry in the server's milliseconds), which the mutex's scripts take
-- for a dead one, as these take the mutex's: a queue serves one kind.
-- A hand-over removes the waiter's registration and records the permit
-- it handed in the field "h<slot>" of the registrations (no token is
-- named so): "<token> <fence>", for a waiter that was not woken to find
-- its fence. There is one such field per slot: the holder's finding it
-- (the wait script), its release, the slot's next taker, or the
-- semaphore's end removes it.
local pf_keep -- the fence counter's life (ms), from ARGV
local pf_refused = 0 -- set to 1 when a wake-up's PUBLISH was refused
local function pf_fenced() return #KEYS >= 4 end
-- pf_reg(w, now): w's TTL, limit and channel when its registration is
-- alive at now, nil otherwise.
local function pf_reg(w, now)
  local e = redis.call("HGET", KEYS[3], w)
  if not e then return nil end
  local x, ttl, limit, ch = string.match(e, "^p(%d+) (%d+) (%d+) (.*)$")
  if not x or tonumber(x) <= now then return nil end
  return tonumber(ttl), tonumber(limit), ch
end
-- pf_first(now) drops the dead registrations at the queue's head and
-- returns the first live waiter with its TTL, limit and channel (nil:
-- nobody waits).
local function pf_first(now)
  while true do
    local w = redis.call("LINDEX", KEYS[2], 0)
    if not w then return nil end
    local ttl, limit, ch = pf_reg(w, now)
    if ttl then return w, ttl, limit, ch end
    redis.call("LPOP", KEYS[2])
    redis.call("HDEL", KEYS[3], w)
  end
end
-- pf_fence(w, s) is the fence of the permit of slot s handed to w, nil
-- when none is recorded for w.
local function pf_fence(w, s)
  local h = redis.call("HGET", KEYS[3], "h" .. s)
  if not h then return nil end
  local tok, fence = string.match(h, "^(%S+) (%d+)$")
  if tok ~= w then return nil end
  return tonumber(fence)
end
-- pf_unhand(w, s) removes the record of slot s's hand-over if it names w.
local function pf_unhand(w, s)
  if pf_fence(w, s) then redis.call("HDEL", KEYS[3], "h" .. s) end
end
-- pf_free(f, limit, now) is the slot a permit of limit takes in the
-- semaphore f (permit_fields; nil: none): the first free one, 0 when no
-- permit is live (a fresh semaphore), nil when every permit is held,
-- false when live permits have another limit.
local function pf_free(f, limit, now)
  if not f then return 0 end
  if f.n ~= limit then
    if permit_last(f, -1, now) > 0 then return false end
    return 0
  end
  for s = 0, f.n - 1 do
    local e = tonumber(f["e" .. s])
    if not (f["t" .. s] and e and e > now) then return s end
  end
  return nil
end
-- pf_take(f, s, w, ttl, limit, now) gives slot s (pf_free) of a semaphore
-- of limit to token w for ttl ms, and returns the fence (0 unfenced) or a
-- negative fence code with nothing written. The record of the slot's last
-- hand-over goes (of every slot's below the larger limit, for a fresh
-- semaphore). As in permit_acquire.lua, PEXPIRE comes first (a no-op on
-- a key that does not exist yet), so that an ACL that denies a write
-- stops the script before it wrote a field without an expiry.
local function pf_take(f, s, w, ttl, limit, now)
  local fence = 0
  if pf_fenced() then
    fence = next_fence(KEYS[4])
    if fence < 0 then return fence end
  end
  local fresh = not f or f.n ~= limit
  local last = 0
  if not fresh then last = permit_last(f, s, now) end
  local exp = now + ttl
  local pttl = math.max(exp, last) - now
  redis.call("PEXPIRE", KEYS[1], pttl)
  if pf_fenced() then
    redis.call("SET", KEYS[4], string.format("%.0f", fence), "PX", pf_keep)
  end
  if fresh then
    local n, hs = limit, {}
    if f then n = math.max(n, f.n) end
    for k = 0, n - 1 do hs[#hs + 1] = "h" .. k end
    redis.call("HDEL", KEYS[3], unpack(hs))
    redis.call("DEL", KEYS[1])
  else
    redis.call("HDEL", KEYS[3], "h" .. s)
  end
  redis.call("HSET", KEYS[1], "limit", string.format("%d", limit), "t" .. s, w, "e" .. s, string.format("%.0f", exp))
  if fresh then redis.call("PEXPIRE", KEYS[1], pttl) end
  return fence
end
-- pf_hand(now) serves the first live waiter from a free slot, removes it
-- from the queue and wakes it on its channel with "token fence now slot".
-- It returns 1 when it handed a permit, 0 when nobody waits or no slot
-- is free for the first waiter, or a negative fence code. A waiter whose
-- limit is not the live permits' is dropped: its next check refuses it.
local function pf_hand(now)
  while true do
    local w, ttl, limit, ch = pf_first(now)
    if not w then return 0 end
    local f = permit_fields(KEYS[1])
    local s = pf_free(f, limit, now)
    if s == nil then return 0 end
    if s then
      local fence = pf_take(f, s, w, ttl, limit, now)
      if fence < 0 then return fence end
      redis.call("LPOP", KEYS[2])
      -- The record before the registration goes: w's live registration
      -- keeps the hash, and its expiry, while the record is written.
      redis.call("HSET", KEYS[3], "h" .. s, w .. " " .. string.format("%.0f", fence))
      redis.call("HDEL", KEYS[3], w)
      -- The record lives as long as the permit; the queue as long.
      for i = 2, 3 do
        if redis.call("PTTL", KEYS[i]) < ttl then redis.call("PEXPIRE", KEYS[i], ttl) end
      end
      local p = redis.pcall("PUBLISH", ch, w .. " " .. string.format("%.0f", fence) .. " " .. string.format("%.0f", now) .. " " .. s)
      if type(p) == "table" and p.err then pf_refused = 1 end
      return 1
    end
    redis.call("LPOP", KEYS[2])
    redis.call("HDEL", KEYS[3], w)
  end
end
-- pf_settle(now) sets the semaphore's expiry to its latest live permit's,
-- or deletes it, and the records of its hand-overs, when none is live.
local function pf_settle(now)
  local f = permit_fields(KEYS[1])
  local last = 0
  if f then last = permit_last(f, -1, now) end
  if last == 0 then
    if f then
      local hs = {}
      for k = 0, f.n - 1 do hs[#hs + 1] = "h" .. k end
      redis.call("HDEL", KEYS[3], unpack(hs))
    end
    redis.call("DEL", KEYS[1])
  else
    redis.call("PEXPIRE", KEYS[1], last - now)
  end
end

-- ARGV: token, the fence counter's life (ms). Leaves the queue: drops
-- our registration (prune skips our entry in the list). Returns {1,
-- fence, ms left, now, slot} when a live permit had been handed to us
-- (the caller gives it back; its release removes the hand-over's
-- record), {0} otherwise; a handed permit whose fence is lost is freed
-- here instead, and handed on to the first waiters.
pf_keep = ARGV[2]
redis.call("HDEL", KEYS[3], ARGV[1])
local f, s, now = permit_own(KEYS[1], ARGV[1])
if not f then return {0, 0, 0, 0, 0} end
local e = tonumber(f["e" .. s])
if not e or e <= now then return {0, 0, 0, now, 0} end
local fence = pf_fence(ARGV[1], s)
if fence or not pf_fenced() then return {1, fence or 0, e - now, now, s} end
redis.call("HDEL", KEYS[1], "t" .. s, "e" .. s)
while pf_hand(now) == 1 do end
pf_settle(now)
return {0, 0, 0, now, 0}

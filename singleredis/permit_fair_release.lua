-- ARGV: token, the fence counter's life (ms; "0" unfenced). Frees the
-- token's slot, serves the first live waiters from the free slots, and
-- sets the semaphore's expiry to its latest live permit's (it goes with
-- its last). Returns {1 when the permit was live else 0, permits handed
-- (or a negative fence code), 1 if a wake-up was refused else 0}.
pf_keep = ARGV[2]
local f, s, now = permit_own(KEYS[1], ARGV[1])
if not f then return {0, 0, 0} end
pf_unhand(ARGV[1], s)
local e = tonumber(f["e" .. s])
redis.call("HDEL", KEYS[1], "t" .. s, "e" .. s)
local handed = 0
while redis.call("EXISTS", KEYS[2]) == 1 do
  local r = pf_hand(now)
  if r < 0 then handed = r end
  if r <= 0 then break end
  handed = handed + 1
end
pf_settle(now)
local live = 0
if e and e > now then live = 1 end
return {live, handed, pf_refused}

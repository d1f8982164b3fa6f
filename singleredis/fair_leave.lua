-- ARGV: token. Leaves the queue: drops our registration, so that prune
-- skips our entry in the list (an LREM would cost the queue's length, and
-- thousands of waiters give up at once). Returns {1, fence, pttl} when the
-- lock had been handed to us (the caller gives it back), {0, 0, 0}
-- otherwise.
redis.call("HDEL", KEYS[3], ARGV[1])
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return {0, 0, 0} end
local fence = 1
if fenced() then fence = tonumber(redis.call("GET", KEYS[4])) or 0 end
return {1, fence, redis.call("PTTL", KEYS[1])}

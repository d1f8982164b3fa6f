-- ARGV: our token, the fence counter's life (ms). Compare-and-delete, then the key goes to the first live
-- waiter. Returns {released, fence handed (0: nobody waits, < 0: a fence
-- code, the key stays free), 1 if the wake-up was refused else 0}.
fence_keep = ARGV[2]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return {0, 0, 0} end
redis.call("DEL", KEYS[1])
if redis.call("EXISTS", KEYS[2]) == 0 then return {1, 0, 0} end
local fence = hand(now_ms())
return {1, fence, wake_refused}

if redis.replicate_commands then redis.replicate_commands() end
local function next_fence(k)
  local typ = redis.call("TYPE", k)["ok"]
  if typ ~= "none" and typ ~= "string" then return -3 end
  local n = 0
  local cur = redis.call("GET", k)
  if cur then
    if not string.match(cur, "^%d+$") then return -1 end
    n = tonumber(cur)
    if not n then return -2 end
  end
  local t = redis.call("TIME")
  local f = math.max(n + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  if f >= 9007199254740992 then return -2 end
  return f
end

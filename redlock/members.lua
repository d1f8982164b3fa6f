if redis.replicate_commands then redis.replicate_commands() end
-- The membership round (members.go): KEYS[1] is MembersKey; ARGV[1] this
-- Locker's field ("id,id,... prefix"), ARGV[2] its masters' addresses,
-- ARGV[3] how long a registration lives (ms), ARGV[4] "1" to register,
-- "0" to check only. Replies {1} (no conflict), {1, created} (registered;
-- created is 1 when the field was not there before),
-- {0, field, value} (a live registration of the same prefix more than one
-- master apart: nothing written), {-1, type} (the key is not a hash:
-- nothing written).
local typ = redis.call("TYPE", KEYS[1])["ok"]
if typ ~= "none" and typ ~= "hash" then return {-1, typ} end
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local life = tonumber(ARGV[3])
local ids, prefix = string.match(ARGV[1], "^(%S*) (.*)$")
local function has(list, id)
  return string.find("," .. list .. ",", "," .. id .. ",", 1, true) ~= nil
end
local function apart(a, b)
  local n = 0
  for id in string.gmatch(a, "[^,]+") do if not has(b, id) then n = n + 1 end end
  for id in string.gmatch(b, "[^,]+") do if not has(a, id) then n = n + 1 end end
  return n
end
local kv = redis.call("HGETALL", KEYS[1])
local last, stale = now + life, {}
for i = 1, #kv, 2 do
  local f, v = kv[i], kv[i + 1]
  local exp = tonumber(string.match(v, "^%d+") or "")
  if not exp or exp <= now then
    stale[#stale + 1] = f
  else
    local oids, opre = string.match(f, "^(%S*) (.*)$")
    if f ~= ARGV[1] and opre == prefix and apart(ids, oids) > 1 then return {0, f, v} end
    if exp > last then last = exp end
  end
end
if ARGV[4] == "1" then
  for _, f in ipairs(stale) do redis.call("HDEL", KEYS[1], f) end
  local created = redis.call("HSET", KEYS[1], ARGV[1], string.format("%.0f", now + life) .. " " .. ARGV[2])
  redis.call("PEXPIREAT", KEYS[1], string.format("%.0f", last))
  return {1, created}
end
return {1}

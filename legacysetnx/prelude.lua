
local unit = ARGV[3]
local now = tonumber(ARGV[1])
if not now then
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call("TIME")
  if unit == "ms" then
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  else
    now = tonumber(t[1])
  end
end
local function ts(v)
  if not (string.match(v, "^%d+$") or string.match(v, "^%d+%.%d+$")) then return nil, -1 end
  local n = tonumber(v)
  if not n then return nil, -2 end
  if unit == "ms" then
    if n < 1e11 or n >= 1e14 then return nil, -2 end
  elseif n < 1e9 or n >= 1e11 then return nil, -2 end
  return n, 0
end
local function write(exp)
  local v = string.format("%d", exp)
  if ARGV[4] == "1" then
    local ms = (exp - now) * (unit == "ms" and 1 or 1000) + 1000
    redis.call("SET", KEYS[1], v, "PX", string.format("%d", ms))
  else
    redis.call("SET", KEYS[1], v)
  end
  return v
end

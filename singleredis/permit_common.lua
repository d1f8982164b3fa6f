local function permit_now()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function permit_fields(k)
  local all = redis.call("HGETALL", k)
  local f = {}
  for i = 1, #all, 2 do f[all[i]] = all[i + 1] end
  return f
end
local function permit_slot(f, token)
  local n = tonumber(f["limit"]) or 0
  for s = 0, n - 1 do
    if f["t" .. s] == token then return s end
  end
  return nil
end

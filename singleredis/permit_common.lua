local function permit_now()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function permit_fields(k)
  local all = redis.call("HGETALL", k)
  local f = {}
  for i = 1, #all, 2 do f[all[i]] = all[i + 1] end
  local limit = f["limit"]
  if not limit or not string.match(limit, "^[1-9]%d*$") or #limit > 4 or tonumber(limit) > MAX_PERMITS then return nil end
  f.n = tonumber(limit)
  for i = 1, #all, 2 do
    if all[i] ~= "limit" then
      local s = string.match(all[i], "^[te](%d+)$")
      if not s or #s > 4 or tonumber(s) >= f.n then return nil end
    end
  end
  return f
end
local function permit_slot(f, token)
  for s = 0, f.n - 1 do
    if f["t" .. s] == token then return s end
  end
  return nil
end
local function permit_own(k, token)
  if redis.call("TYPE", k)["ok"] ~= "hash" then return nil end
  local now = permit_now()
  local f = permit_fields(k)
  if not f then return nil end
  local s = permit_slot(f, token)
  if not s then return nil end
  return f, s, now
end
local function permit_last(f, skip, now)
  local last = 0
  for s = 0, f.n - 1 do
    local e = tonumber(f["e" .. s])
    if s ~= skip and f["t" .. s] and e and e > now then last = math.max(last, e) end
  end
  return last
end

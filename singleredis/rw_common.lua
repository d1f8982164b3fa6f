local function rw_fields(k)
  local all = redis.call("HGETALL", k)
  local f, bad, sem = {r = {}, q = {}}, false, false
  for i = 1, #all, 2 do
    local name, v = all[i], all[i + 1]
    local kind, id = string.match(name, "^([rq]):(%x+)$")
    if name == "w" and #v == 32 and string.match(v, "^%x+$") then
      f.w = v
    elseif name == "we" and string.match(v, "^%d+$") and #v < 16 then
      f.we = tonumber(v)
    elseif kind and #id == 32 and string.match(v, "^%d+$") and #v < 16 then
      f[kind][id] = tonumber(v)
    else
      bad = true
      sem = sem or name == "limit"
    end
  end
  if bad or (f.w == nil) ~= (f.we == nil) then return nil, sem end
  return f
end
local function rw_last(f, skip, now)
  local last = 0
  if f.w and f.we > now and skip ~= "w" then last = f.we end
  for id, e in pairs(f.r) do
    if e > now and skip ~= "r:" .. id then last = math.max(last, e) end
  end
  for id, e in pairs(f.q) do
    if e > now and skip ~= "q:" .. id then last = math.max(last, e) end
  end
  return last
end
local function rw_dead(f, now)
  local d = {}
  if f.w and f.we <= now then
    d[#d + 1] = "w"
    d[#d + 1] = "we"
  end
  for id, e in pairs(f.r) do
    if e <= now then d[#d + 1] = "r:" .. id end
  end
  for id, e in pairs(f.q) do
    if e <= now then d[#d + 1] = "q:" .. id end
  end
  return d
end
local function rw_hdel(k, fields)
  for i = 1, #fields, 1000 do
    redis.call("HDEL", k, unpack(fields, i, math.min(i + 999, #fields)))
  end
end
local function rw_own(k, token, mode)
  if redis.call("TYPE", k)["ok"] ~= "hash" then return nil end
  local now = permit_now()
  local f = rw_fields(k)
  if not f then return nil end
  if mode == "w" then
    if f.w ~= token then return nil end
    return f, "w", f.we, now
  end
  local e = f.r[token]
  if not e then return nil end
  return f, "r:" .. token, e, now
end

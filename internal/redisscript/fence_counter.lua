if redis.replicate_commands then redis.replicate_commands() end
local function fence_read(k)
  local cur = redis.pcall("GET", k)
  if not cur then return nil end
  if type(cur) == "table" then return -3 end
  if not string.match(cur, "^%d+$") then return -1 end
  local n = tonumber(cur)
  if not n or n >= 9007199254740991 then return -2 end
  return n
end
local function fence_clock()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fence_seed(now)
  return now + 20000
end
local function fence_guess(c, g, now)
  if not g or g <= c or g >= 9007199254740991 then return false end
  return g == c + 1 or g <= (now or fence_clock()) + 20000
end

local function next_fence(k)
  local n = fence_read(k)
  if n and n < 0 then return n end
  local f = math.max((n or 0) + 1, fence_clock())
  if f >= 9007199254740992 then return -2 end
  return f
end

-- heap.lua — a binary min-heap for policies (`local heap = require "heap"`): heap.new() makes an
-- empty one; h:push(key, tie, item) files item under the numbers key and tie (ties of key broken
-- by the lower tie, so the order is deterministic); h:pop() returns the item with the least
-- (key, tie) and its key, or nil when empty; h:size(). Keys are compared inline, without a function
-- call, because policies run with the JIT off. The shipped kept_place.lua takes the slots for new
-- replicas from one, lightest node first, so that a re-plan of a thousand nodes looks at a few
-- slots per replica instead of every slot.
local heap = {}
heap.__index = heap

function heap.new()
  return setmetatable({ keys = {}, ties = {}, items = {}, n = 0 }, heap)
end

function heap:size() return self.n end

local function before(keys, ties, a, b)
  return keys[a] < keys[b] or (keys[a] == keys[b] and ties[a] < ties[b])
end

local function exchange(self, a, b)
  local keys, ties, items = self.keys, self.ties, self.items
  keys[a], keys[b] = keys[b], keys[a]
  ties[a], ties[b] = ties[b], ties[a]
  items[a], items[b] = items[b], items[a]
end

function heap:push(key, tie, item)
  local keys, ties = self.keys, self.ties
  local i = self.n + 1
  self.n = i
  keys[i], ties[i], self.items[i] = key, tie, item
  while i > 1 do
    local up = math.floor(i / 2)
    if not before(keys, ties, i, up) then break end
    exchange(self, i, up)
    i = up
  end
end

function heap:pop()
  local keys, ties, items = self.keys, self.ties, self.items
  local n = self.n
  if n == 0 then return nil end
  local top, top_key = items[1], keys[1]
  keys[1], ties[1], items[1] = keys[n], ties[n], items[n]
  keys[n] = nil
  ties[n] = nil
  items[n] = nil
  n = n - 1
  self.n = n
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= n and before(keys, ties, l, m) then m = l end
    if r <= n and before(keys, ties, r, m) then m = r end
    if m == i then break end
    exchange(self, i, m)
    i = m
  end
  return top, top_key
end

return heap

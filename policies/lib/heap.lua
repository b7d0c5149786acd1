-- heap.lua — a binary min-heap for policies (`local heap = require "heap"`): heap.new() makes an
-- empty one; h:push(key, tie, item) files item under the numbers key and tie (ties of key broken
-- by the lower tie, so the order is deterministic); h:pop() returns the item with the least
-- (key, tie) and its key, or nil when empty; h:size(). Keys are compared inline and entries moved
-- rather than swapped, because policies run with the JIT off. The shipped kept_place.lua takes the
-- slots for new replicas from one, lightest node first, so that a re-plan of a thousand nodes looks
-- at a few slots per replica instead of every slot.
local heap = {}
heap.__index = heap

function heap.new()
  return setmetatable({ keys = {}, ties = {}, items = {}, n = 0 }, heap)
end

function heap:size() return self.n end

function heap:push(key, tie, item)
  local keys, ties, items = self.keys, self.ties, self.items
  local i = self.n + 1
  self.n = i
  while i > 1 do  -- move the parents down until the new entry's place is found
    local up = math.floor(i / 2)
    local k = keys[up]
    if k < key or (k == key and ties[up] < tie) then break end
    keys[i], ties[i], items[i] = k, ties[up], items[up]
    i = up
  end
  keys[i], ties[i], items[i] = key, tie, item
end

function heap:pop()
  local keys, ties, items = self.keys, self.ties, self.items
  local n = self.n
  if n == 0 then return nil end
  local top, top_key = items[1], keys[1]
  local key, tie, item = keys[n], ties[n], items[n]  -- the last entry, sifted down from the top
  keys[n] = nil
  ties[n] = nil
  items[n] = nil
  n = n - 1
  self.n = n
  if n == 0 then return top, top_key end
  local i = 1
  while true do
    local c = 2 * i
    if c > n then break end
    if c < n and (keys[c + 1] < keys[c] or (keys[c + 1] == keys[c] and ties[c + 1] < ties[c])) then c = c + 1 end
    if key < keys[c] or (key == keys[c] and tie < ties[c]) then break end
    keys[i], ties[i], items[i] = keys[c], ties[c], items[c]
    i = c
  end
  keys[i], ties[i], items[i] = key, tie, item
  return top, top_key
end

return heap

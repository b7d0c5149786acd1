-- mro_layout.lua — the maximum rank overlap layout (Lazarus §4.1), repaired where the paper's
-- construction falls short (docs/placement.md): shared by the `mro` placement policy and by the
-- default placement, `goodput`, which weighs it as the maximum-survival end of the frontier
-- (`local mro_layout = require "mro_layout"`; mro_layout.place(ctx) -> the placement, per layer).
--
-- An expert is lost when every node holding it fails, so the placement should have few distinct
-- expert node sets, none small. Experts go from the least to the most replicated in groups of c
-- (slots per node); each group gets a block of consecutive nodes as
-- long as its least replicated member's count, and every member holds one replica on every node
-- of its block. Every expert's node set then contains its block, so the only sets that matter are
-- the disjoint blocks — as few and as large as any placement can have. Replicas beyond a member's
-- block are dealt over the free slots. When the blocks do not all fit in N nodes (the last,
-- partial group is cut short), the tail of the layer — the cut block and the blocks before it,
-- up to 16 nodes — is improved by sal.placement_search, which scores placements by the exact
-- recovery probability at every k, fewest failures first. Experts with the same replica count are
-- interchangeable for recovery, so among them the hot ones are spread over the blocks. Last, with
-- the experts' loads known, sal.balance_placement evens out the work per node (each expert's load
-- split over its replicas, as the dispatcher does) by moves that keep every minimal node set — so
-- the recovery probability at every k is exactly that of the layout above — e.g. the least
-- replicated experts spread over their blocks instead of filling the first, and the other replicas
-- dealt heaviest first to the least loaded nodes.
local SEARCH_NODES = 16   -- exact scoring enumerates all 2^N failure sets

local function ascending(replicas, loads)
  local order = {}
  for e = 1, #replicas do order[e] = e end
  table.sort(order, function(a, b)
    if replicas[a] ~= replicas[b] then return replicas[a] < replicas[b] end
    if (loads[a] or 0) ~= (loads[b] or 0) then return (loads[a] or 0) > (loads[b] or 0) end
    return a < b
  end)
  return order
end

-- Within each run of equally replicated experts, deals the experts (hottest first) over the groups
-- of `slots` the run covers in snake order, so no block gathers the hot experts. Any order within a
-- run gives the same node sets, so the recovery probability is unchanged; only the load evens out.
local function balance_runs(order, replicas, loads, slots)
  local out, i = {}, 1
  while i <= #order do
    local j = i
    while j < #order and replicas[order[j + 1]] == replicas[order[i]] do j = j + 1 end
    if (loads[order[i]] or 0) == (loads[order[j]] or 0) then   -- equal loads: keep expert order
      for pos = i, j do out[#out + 1] = order[pos] end
      i = j + 1
      goto continue
    end
    local groups = {}   -- the groups this run touches: {first position, free positions}
    for pos = i, j do
      local g = math.floor((pos - 1) / slots)
      if #groups == 0 or groups[#groups].id ~= g then groups[#groups + 1] = { id = g, members = {}, cap = 0 } end
      groups[#groups].cap = groups[#groups].cap + 1
    end
    local k, step = 1, 1
    for pos = i, j do
      while #groups[k].members >= groups[k].cap do
        k = k + step
        if k > #groups or k < 1 then step = -step; k = k + step end
      end
      table.insert(groups[k].members, order[pos])
      k = k + step
      if k > #groups or k < 1 then step = -step; k = k + step end
    end
    for _, g in ipairs(groups) do for _, e in ipairs(g.members) do out[#out + 1] = e end end
    i = j + 1
    ::continue::
  end
  return out
end

-- Groups of `slots` experts, each on a block of consecutive nodes (cut short at the last node).
local function lay_blocks(order, replicas, placement, free, slots)
  local blocks, in_block, cursor = {}, {}, 0
  for g = 1, #order, slots do
    local want = replicas[order[g]]
    local size = math.min(want, #placement - cursor)
    blocks[#blocks + 1] = { first = cursor + 1, cut = size < want, size = size }
    for i = g, math.min(g + slots - 1, #order) do
      in_block[order[i]] = size
      for n = cursor + 1, cursor + size do
        placement[n][#placement[n] + 1] = order[i]
        free[n] = free[n] - 1
      end
    end
    cursor = cursor + size
  end
  return blocks, in_block
end

-- The other replicas, most replicated expert first, over the free slots level by level (every
-- node's first free slot, then every node's second, ...), so an expert's extras land on distinct nodes.
local function deal_extras(order, replicas, in_block, placement, free, slots)
  local list = {}
  for level = 1, slots do
    for n = 1, #placement do if free[n] >= level then list[#list + 1] = n end end
  end
  local k = 0
  for i = #order, 1, -1 do
    local e = order[i]
    for _ = in_block[e] + 1, replicas[e] do
      k = k + 1
      placement[list[k]][#placement[list[k]] + 1] = e
    end
  end
end

-- Nodes first..N searched as one small layer; experts with replicas outside are carried, not scored.
local function search_tail(placement, first, replicas, floor)
  local tail, inside, ignore = {}, {}, {}
  for n = first, #placement do
    tail[#tail + 1] = placement[n]
    for _, e in ipairs(placement[n]) do inside[e] = (inside[e] or 0) + 1 end
  end
  for e, k in pairs(inside) do if k < replicas[e] then ignore[#ignore + 1] = e end end
  local better, info = sal.placement_search(tail, { floor = floor, ignore = ignore })
  for i, node in ipairs(better) do placement[first + i - 1] = node end
  return info.valid
end

-- Last resort for validity: the replicas on nodes first..N dealt round robin in expert order.
local function round_robin(placement, first)
  local held = {}
  for n = first, #placement do
    for _, e in ipairs(placement[n]) do held[#held + 1] = e end
    placement[n] = {}
  end
  table.sort(held)
  for i, e in ipairs(held) do
    local n = first + (i - 1) % (#placement - first + 1)
    placement[n][#placement[n] + 1] = e
  end
end

local function repair(placement, blocks, replicas, floor)
  local cut
  for b, block in ipairs(blocks) do if block.cut then cut = cut or b end end
  if not cut then return end
  local b = cut
  while b > 1 and #placement - blocks[b - 1].first + 1 <= SEARCH_NODES do b = b - 1 end
  local first = blocks[b].first
  local searchable = #placement - first + 1 <= SEARCH_NODES and (b < cut or first == 1)
  local valid = searchable and search_tail(placement, first, replicas, floor)
  if not valid and (searchable or blocks[cut].size < floor) then
    round_robin(placement, blocks[math.max(cut - 1, 1)].first)
  end
end

-- Spreads the work (each expert's load over its replicas) as evenly as the layer's minimal node
-- sets allow, without changing them: the recovery probability at every k stays exactly the same.
local function even_out(placement, loads, experts, floor)
  local known, any = {}, false
  for e = 1, experts do
    known[e] = loads[e] or 0
    any = any or known[e] > 0
  end
  if not any then return placement end
  local balanced = sal.balance_placement(placement, known, { floor = floor })
  return balanced
end

local function place_layer(replicas, loads, nodes, slots, floor)
  local placement, free = {}, {}
  for n = 1, nodes do placement[n], free[n] = {}, slots end
  local order = balance_runs(ascending(replicas, loads), replicas, loads, slots)
  local blocks, in_block = lay_blocks(order, replicas, placement, free, slots)
  deal_extras(order, replicas, in_block, placement, free, slots)
  repair(placement, blocks, replicas, floor)
  return even_out(placement, loads, #replicas, floor)
end

local mro_layout = {}

-- Every layer of ctx (as a placement policy's ctx) laid out; 1-based expert ids per node.
function mro_layout.place(ctx)
  local layers = {}
  for l = 1, ctx.layers do
    layers[l] = place_layer(ctx.replicas[l], ctx.loads and ctx.loads[l] or {}, ctx.nodes, ctx.slots, ctx.floor)
  end
  return layers
end

return mro_layout

-- compact.lua — fewest nodes per expert: each expert is packed onto as few nodes as the floor
-- allows (min(f, N, replicas) distinct nodes), its replicas split as evenly as possible between
-- them. Experts with the most replicas are placed first, each on the emptiest nodes that still have
-- room; if those cannot take its replicas it spreads to more nodes. Packing can strand a later
-- expert on too few nodes (the free slots left are all on one node); such a layer is dealt round
-- robin instead, which always honours the floor. The opposite of spread, for comparison.
local deal = require "deal"

local function pack_layer(replicas, nodes, slots, floor)
  local free, placement = {}, {}
  for n = 1, nodes do free[n], placement[n] = slots, {} end
  local order = sal.argsort(replicas, "desc")
  for _, e in ipairs(order) do
    local left = replicas[e]
    local span = math.min(floor, nodes, left)
    while left > 0 do
      -- the `span` nodes with the most free slots (ties by node id)
      local by_free = sal.argsort(free, "desc")
      local cap, open = 0, 0
      for i = 1, span do
        cap = cap + free[by_free[i]]
        if free[by_free[i]] > 0 then open = open + 1 end
      end
      if cap == 0 then break end   -- stranded: no room left among the nodes it may use
      if (cap < left or open < span) and span < nodes then
        span = span + 1
      else
        for i = 1, span do
          local n = by_free[i]
          local take = math.min(free[n], math.ceil(left / (span - i + 1)))
          for _ = 1, take do placement[n][#placement[n] + 1] = e end
          free[n], left = free[n] - take, left - take
        end
      end
    end
  end
  return placement
end

local function place_layer(replicas, nodes, slots, floor)
  local packed = pack_layer(replicas, nodes, slots, floor)
  local placed = 0
  for _, node in ipairs(packed) do placed = placed + #node end
  local total = 0
  for _, r in ipairs(replicas) do total = total + r end
  if placed == total and deal.spans_ok(packed, replicas, floor) then return packed end
  return deal.round_robin(replicas, nodes)
end

local function decide(ctx)
  local layers = {}
  for l = 1, ctx.layers do layers[l] = place_layer(ctx.replicas[l], ctx.nodes, ctx.slots, ctx.floor) end
  return { placement = layers }
end

local function selftest(t)
  local ctx = { nodes = 4, slots = 3, experts = 3, layers = 1, floor = 2, replicas = { { 6, 4, 2 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  local span = {}
  for n, node in ipairs(p.placement[1]) do
    for _, e in ipairs(node) do span[e] = span[e] or {}; span[e][n] = true end
  end
  for e = 1, 3 do
    local k = 0
    for _ in pairs(span[e]) do k = k + 1 end
    t.eq(k, 2, "expert " .. e .. " on exactly f nodes")
  end
  -- packing the 6 replicas first leaves the other expert only one node: dealt round robin instead
  local stranded = { nodes = 3, slots = 3, experts = 2, layers = 1, floor = 2, replicas = { { 3, 6 } } }
  t.valid(decide(stranded), stranded)
end

return {
  api = 1, kind = "placement", name = "compact",
  doc = "fewest nodes per expert: each expert on min(f, N) nodes where it fits",
  decide = decide, selftest = selftest,
}

-- compact.lua — fewest nodes per expert: each expert is packed onto as few nodes as the floor
-- allows (min(f, N, replicas) distinct nodes), its replicas split as evenly as possible between
-- them. Experts with the most replicas are placed first, each on the emptiest nodes; if those
-- cannot take its replicas it spreads to more nodes. The opposite of spread, for comparison.
local function place_layer(replicas, nodes, slots, floor)
  local free, placement = {}, {}
  for n = 1, nodes do free[n], placement[n] = slots, {} end
  local order = sal.argsort(replicas, "desc")
  for _, e in ipairs(order) do
    local left = replicas[e]
    local span = math.min(floor, nodes, left)
    while left > 0 do
      -- the `span` nodes with the most free slots (ties by node id)
      local by_free = sal.argsort(free, "desc")
      local cap = 0
      for i = 1, span do cap = cap + free[by_free[i]] end
      if cap < left and span < nodes then
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
end

return {
  api = 1, kind = "placement", name = "compact",
  doc = "fewest nodes per expert: each expert on min(f, N) nodes where it fits",
  decide = decide, selftest = selftest,
}

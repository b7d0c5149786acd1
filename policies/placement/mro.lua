-- mro.lua — maximum rank overlap (Lazarus §4.1): make the node sets of experts overlap as much as
-- possible, so that few distinct sets exist and random failures rarely cover one completely.
-- Experts are taken by popularity (replicas, then load) in groups of c; each group gets a node
-- group as large as its representative's (most replicated member's) replica count, every node of
-- it holding the whole expert group; a less replicated expert takes a prefix of those nodes, so
-- the sets are nested within a group and disjoint between groups. Replicas that do not fit (when
-- the node groups add up to more than N the last one is cut short) are placed afterwards, each on
-- a node with free slots that does not hold that expert yet, emptiest first.
local function by_popularity(replicas, loads)
  local key = {}
  for e = 1, #replicas do key[e] = replicas[e] * 1e12 + (loads[e] or 0) end
  return sal.argsort(key, "desc")
end

local function place_layer(replicas, loads, nodes, slots)
  local order = by_popularity(replicas, loads)
  local placement, free = {}, {}
  for n = 1, nodes do placement[n], free[n] = {}, slots end
  local leftover, cursor = {}, 1
  for g = 1, #order, slots do
    local rep = replicas[order[g]]
    local size = math.min(rep, nodes - cursor + 1)
    for i = g, math.min(g + slots - 1, #order) do
      local e = order[i]
      local here = math.min(replicas[e], size)
      for n = cursor, cursor + here - 1 do
        placement[n][#placement[n] + 1] = e
        free[n] = free[n] - 1
      end
      for _ = here + 1, replicas[e] do leftover[#leftover + 1] = e end
    end
    cursor = cursor + size
  end
  for _, e in ipairs(leftover) do
    local best
    for n = 1, nodes do
      if free[n] > 0 then
        local holds = false
        for _, x in ipairs(placement[n]) do if x == e then holds = true break end end
        local score = (holds and 0 or 1e6) + free[n]
        if best == nil or score > best.score then best = { node = n, score = score } end
      end
    end
    placement[best.node][#placement[best.node] + 1] = e
    free[best.node] = free[best.node] - 1
  end
  return placement
end

local function decide(ctx)
  local layers = {}
  for l = 1, ctx.layers do layers[l] = place_layer(ctx.replicas[l], ctx.loads[l] or {}, ctx.nodes, ctx.slots) end
  return { placement = layers }
end

local function selftest(t)
  -- 4 nodes x 2 slots, experts 1..4 with replicas 3, 2, 2, 1: groups {1,2} on nodes 1-3, {3,4} on node 4.
  local ctx = { nodes = 4, slots = 2, experts = 4, layers = 1, floor = 1, replicas = { { 3, 2, 2, 1 } },
                loads = { { 30, 20, 20, 10 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  local r = sal.recovery(p.placement, 1)
  t.ok(r.p > 0, "survives some single failures")
end

return {
  api = 1, kind = "placement", name = "mro",
  doc = "Lazarus maximum rank overlap: nested node sets by popularity group",
  decide = decide, selftest = selftest,
}

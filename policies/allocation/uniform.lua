-- uniform.lua — classic expert parallelism: every expert gets the same number of replicas,
-- whatever its load (the first experts by id take one more when N*c is not a multiple of E).
local function decide(ctx)
  local total = ctx.nodes * ctx.slots
  local base, extra = math.floor(total / ctx.experts), total % ctx.experts
  local replicas = {}
  for l = 1, ctx.layers do
    replicas[l] = {}
    for e = 1, ctx.experts do replicas[l][e] = base + (e <= extra and 1 or 0) end
  end
  return { replicas = replicas, floor = math.max(1, math.min(ctx.floor, base)) }
end

local function selftest(t)
  local ctx = { nodes = 3, slots = 3, experts = 4, layers = 2, min_replicas = 2, floor = 2, floor_note = "",
                loads = { { 9, 0, 0, 1 }, { 1, 1, 1, 1 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.replicas[1], { 3, 2, 2, 2 }, "load does not matter")
end

return {
  api = 1, kind = "allocation", name = "uniform",
  doc = "classic expert parallelism: the same replica count for every expert",
  decide = decide, selftest = selftest,
}

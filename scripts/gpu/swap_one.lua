-- swap_one.lua — a placement policy for measuring one thing: a re-plan that moves one expert each
-- way. The first plan deals the replicas to the nodes in turn (deal.round_robin); every re-plan
-- after it keeps the placement in force (ctx.current) except that, in the first layer, node 1's
-- first slot and node 2's first slot trade experts. bench.sh's `replan` step
-- uses it (SAL_GPU_REPLAN_PLACEMENT) to time the plan switch of a re-plan that moves one expert
-- replica to each of two GPU workers, beside the default placement's re-plans.
-- Not a policy to train with: it ignores loads and failures.

local deal = require "deal"

local function dealt(ctx)
  local layers = {}
  for l = 1, ctx.layers do layers[l] = deal.round_robin(ctx.replicas[l], ctx.nodes) end
  return layers
end

local function holds(slots, e)
  for _, x in ipairs(slots) do if x == e then return true end end
  return false
end

local function decide(ctx)
  local cur = ctx.current
  if type(cur) ~= "table" or #cur ~= ctx.layers or ctx.nodes < 2 then
    return { placement = dealt(ctx), note = "first plan: replicas dealt to the nodes in turn" }
  end
  local layers = {}
  for l = 1, ctx.layers do
    layers[l] = {}
    for n = 1, ctx.nodes do
      layers[l][n] = {}
      for s, e in ipairs(cur[l][n] or {}) do layers[l][n][s] = e end
    end
  end
  local a, b = layers[1][1], layers[1][2]
  if #a > 0 and #b > 0 and not holds(a, b[1]) and not holds(b, a[1]) then
    a[1], b[1] = b[1], a[1]
    return { placement = layers, note = "kept, but for one expert traded each way in layer 1" }
  end
  return { placement = dealt(ctx), note = "nothing to trade: replicas dealt to the nodes in turn" }
end

local function selftest(t)
  local ctx = { nodes = 2, slots = 2, experts = 4, layers = 1, floor = 1, replicas = { { 1, 1, 1, 1 } } }
  local first = decide(ctx)
  t.valid(first, ctx)
  t.eq(first.placement[1], { { 1, 3 }, { 2, 4 } })
  ctx.current = first.placement
  local next = decide(ctx)
  t.valid(next, ctx)
  t.eq(next.placement[1], { { 2, 3 }, { 1, 4 } })
end

return {
  api = 1, kind = "placement", name = "swap_one",
  doc = "for measurements: keeps the placement in force, one expert traded each way in layer 1",
  decide = decide, selftest = selftest,
}

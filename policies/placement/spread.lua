-- spread.lua — round robin: the replicas, expert by expert, are dealt to the nodes in turn, so an
-- expert's replicas land on distinct nodes (as long as it has at most N of them) and every node
-- gets exactly c slots. Load-blind; the simplest way to honour the floor.
local deal = require "deal"

local function decide(ctx)
  local layers = {}
  for l = 1, ctx.layers do layers[l] = deal.round_robin(ctx.replicas[l], ctx.nodes) end
  return { placement = layers }
end

local function selftest(t)
  local ctx = { nodes = 3, slots = 2, experts = 3, layers = 1, floor = 2, replicas = { { 2, 2, 2 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.placement[1], { { 1, 2 }, { 1, 3 }, { 2, 3 } })
end

return {
  api = 1, kind = "placement", name = "spread",
  doc = "round robin: each expert's replicas on consecutive distinct nodes",
  decide = decide, selftest = selftest,
}

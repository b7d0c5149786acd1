-- eplb.lua — DeepSeek's expert-parallel load balancer, as the comparison: one replica each, then
-- every extra replica goes to the expert with the highest load per replica. No fault-tolerance
-- floor: an unpopular expert may keep a single replica (floor 1).
local function allocate_layer(loads, total)
  local replicas = {}
  for e = 1, #loads do replicas[e] = 1 end
  for _ = #loads + 1, total do
    local best, best_load = 1, -1
    for e = 1, #loads do
      local per = loads[e] / replicas[e]
      if per > best_load then best, best_load = e, per end
    end
    replicas[best] = replicas[best] + 1
  end
  return replicas
end

local function decide(ctx)
  local replicas = {}
  for l = 1, ctx.layers do replicas[l] = allocate_layer(ctx.loads[l], ctx.nodes * ctx.slots) end
  return { replicas = replicas, floor = 1 }
end

local function selftest(t)
  local ctx = { nodes = 2, slots = 4, experts = 4, layers = 1, min_replicas = 1, floor = 1, floor_note = "",
                loads = { { 40, 20, 10, 0 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.replicas[1], { 4, 2, 1, 1 }, "extra replicas chase the highest load per replica")
end

return {
  api = 1, kind = "allocation", name = "eplb",
  doc = "DeepSeek EPLB: extra replicas to the highest load per replica; no floor",
  decide = decide, selftest = selftest,
}

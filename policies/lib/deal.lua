-- deal.lua — shared by placement policies (`local deal = require "deal"`): dealing replicas round
-- robin, and checking that every expert spans enough distinct nodes.
local deal = {}

-- The replicas of each expert, expert by expert, dealt to the nodes in turn: an expert's replicas
-- land on consecutive distinct nodes (while it has at most N of them), every node gets its share.
function deal.round_robin(replicas, nodes)
  local placement, k = {}, 0
  for n = 1, nodes do placement[n] = {} end
  for e, r in ipairs(replicas) do
    for _ = 1, r do
      local node = k % nodes + 1
      placement[node][#placement[node] + 1] = e
      k = k + 1
    end
  end
  return placement
end

-- True when every expert spans at least min(floor, #placement, replicas[e]) distinct nodes.
function deal.spans_ok(placement, replicas, floor)
  local seen = {}
  for n, node in ipairs(placement) do
    for _, e in ipairs(node) do
      seen[e] = seen[e] or {}
      seen[e][n] = true
    end
  end
  for e, r in ipairs(replicas) do
    local k = 0
    for _ in pairs(seen[e] or {}) do k = k + 1 end
    if k < math.min(floor, #placement, r) then return false end
  end
  return true
end

return deal

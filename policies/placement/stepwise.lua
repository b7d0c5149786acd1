-- stepwise.lua — goodput's trade of balance against survival (policies/lib/goodput_place.lua), with
-- the balance judged on the window's recent steps (ctx.steps) rather than on their mean: each
-- candidate's balance is the mean over those steps of the busiest node's share when each step is
-- split as the dispatcher splits it (ctx.dispatch), and chain and mixed — layouts whose experts'
-- holders overlap little, so a step's excess passes on to other nodes — join the candidates. It
-- pays where expert work is most of a step; it gives up survival of two or three losses for it
-- (docs/placement.md, "Judged on the steps"). Before any step is measured it decides as goodput.
local place = require "goodput_place"

local function decide(ctx) return place.decide(ctx, { steps = true }) end

local function selftest(t)
  -- 8 nodes x 4 slots, 16 experts of 2 replicas; each step routes 400 more tokens to two of them
  local ctx = { nodes = 8, slots = 4, experts = 16, layers = 1, floor = 2, replicas = { {} }, loads = { {} },
                steps = {}, dispatch = "counts",
                failures = { rate = 2e-4, source = "assumed", correlated = 0, window_s = 10, restore_s = 120,
                             restore_source = "assumed" } }
  for e = 1, 16 do ctx.replicas[1][e], ctx.loads[1][e] = 2, 150 end
  for s = 1, 12 do
    local step = {}
    for e = 1, 16 do step[e] = 100 end
    step[(5 * s) % 16 + 1] = 500
    step[(11 * s + 3) % 16 + 1] = 500
    ctx.steps[s] = { step }
  end
  local p = decide(ctx)
  t.valid(p, ctx)
  t.ok(p.choice.point == "chain" or p.choice.point == "mixed", "a layout that passes the excess on, not " .. p.choice.point)
  t.eq(p.choice.steps, 12)
  -- without steps it decides as goodput
  ctx.steps = nil
  local q = decide(ctx)
  t.valid(q, ctx)
  t.ok(q.choice.steps == nil and q.choice.point ~= "chain" and q.choice.point ~= "mixed", "on the loads: " .. q.choice.point)
end

return {
  api = 1, kind = "placement", name = "stepwise",
  doc = "goodput's balance-against-survival trade with the balance judged on the recent steps as dispatched; "
        .. "chain and mixed layouts weighed too",
  decide = decide, selftest = selftest,
}

-- goodput.lua — the default placement: balance and survival traded on purpose, judged on the
-- window's mean loads. Of the placements that no other beats on both balance and recovery — the
-- frontier (sal.frontier: blocks of g experts on a node set, from mro's c down to 1, balance
-- first, and mro's own layout, the maximum-survival end) — it takes the one with the highest
-- expected goodput (of those within 0.2 % of it, the most survivable): the throughput an imbalance
-- costs against the time that failures wiping out an expert cost, at the failure rate the job sees
-- or states. On a re-plan with a plan in force (ctx.current) it keeps the placement in force,
-- adjusted to the new replica counts and loads, when that moves fewer replicas and re-placing would
-- gain less than 1 %. policies/lib/goodput_place.lua is the placement (shared with `stepwise`, which
-- judges the balance on the recent steps instead), policies/lib/goodput.lua the model. The
-- proposal's note says what it chose, at what cost, and the alternative it turned down (job.plan()
-- shows it).
local place = require "goodput_place"

local function decide(ctx) return place.decide(ctx, { steps = false }) end

local function selftest(t)
  -- 8 nodes x 4 slots, two hot experts: the balanced end wins at the assumed failure rate
  local ctx = { nodes = 8, slots = 4, experts = 8, layers = 1, floor = 2,
                replicas = { { 2, 2, 2, 2, 2, 2, 10, 10 } }, loads = { { 1, 1, 1, 1, 1, 1, 20, 20 } },
                failures = { rate = 2e-4, source = "assumed", correlated = 0, window_s = 10, restore_s = 120,
                             restore_source = "assumed" } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.ok(p.choice.balance <= p.choice.turned_down.balance, "chose the better balanced point")
  t.ok(p.note:find("Turned down", 1, true) ~= nil, "the note names the alternative")
  -- a node failing every hour, every loss taking another with it, an hour per wipe-out: survival wins
  ctx.failures = { rate = 1, source = "stated", correlated = 1, window_s = 10, restore_s = 3600, restore_source = "" }
  local q = decide(ctx)
  t.valid(q, ctx)
  t.ok(q.choice.p[2] >= p.choice.p[2], "chose the more survivable point")
end

return {
  api = 1, kind = "placement", name = "goodput",
  doc = "the frontier point (balance against survival) with the highest expected goodput at the job's failure rate; "
        .. "mro is its maximum-survival end",
  decide = decide, selftest = selftest,
}

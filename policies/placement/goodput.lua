-- goodput.lua — the default placement: balance and survival traded on purpose. Of the placements
-- that no other beats on both balance and recovery — the frontier (sal.frontier: blocks of g
-- experts on a node set, from mro's c down to 1, balance first, and mro's own layout, the
-- maximum-survival end) — it takes the one with the highest expected goodput (of those within 0.2 %
-- of it, the most survivable): the throughput an imbalance costs (the step waits for each layer's
-- busiest node) against the time that failures wiping out an expert cost (a restore from peers or
-- disk and the steps run again), at the failure rate the job sees or states (ctx.failures;
-- policies/lib/goodput.lua has the model). The proposal's note says what it chose, at what cost,
-- and the alternative it turned down (job.plan() shows it).
local goodput = require "goodput"
local mro_layout = require "mro_layout"

local function most_survivable(points)
  local best
  for _, p in ipairs(points) do
    if not best or goodput.survives_better(p, best) then best = p end
  end
  return best
end

local function loads_of(ctx)
  local loads = {}
  for l = 1, ctx.layers do
    loads[l] = {}
    for e = 1, ctx.experts do loads[l][e] = ctx.loads and ctx.loads[l] and ctx.loads[l][e] or 1 end
  end
  return loads
end

local function summary(p, score)
  return { point = p.name, balance = p.balance, median_balance = p.median, balances = p.balances, p = p.p,
           goodput = score.goodput, speed = score.speed, lost = score.lost }
end

local function decide(ctx)
  local loads = loads_of(ctx)
  local frontier = sal.frontier(ctx.replicas, loads, ctx.nodes, ctx.slots, {
    floor = ctx.floor, include = { { name = "mro", placement = mro_layout.place(ctx) } } })
  local on = {}
  for _, p in ipairs(frontier.points) do
    if p.frontier then on[#on + 1] = p end
  end
  local chosen, score = goodput.best(on, ctx.failures, ctx.nodes)
  -- the alternative: the maximum-survival end, or, when that was chosen, the most balanced point
  local other = most_survivable(on)
  if other == chosen then other = on[1] end
  local other_score = other ~= chosen and goodput.score(other, ctx.failures, ctx.nodes) or nil
  if other == chosen then other = nil end
  local choice = summary(chosen, score)
  if other then choice.turned_down = summary(other, other_score) end
  choice.failures = { rate = ctx.failures.rate, source = ctx.failures.source, restore_s = ctx.failures.restore_s }
  choice.frontier = {}
  for _, p in ipairs(on) do choice.frontier[#choice.frontier + 1] = { point = p.name, balance = p.balance, p = p.p } end
  return { placement = chosen.placement, choice = choice,
           note = goodput.explain(chosen, score, other, other_score, ctx.failures, ctx.nodes) }
end

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

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

-- A large plan (layers x nodes x slots above this) is weighed on SAMPLE_LAYERS evenly spaced layers,
-- and only the chosen construction is then built for all of them: the frontier of every layer at
-- 1024 nodes would take about half a second and its placements more memory than a policy has.
-- (24 layers on 16 nodes x 8 slots, the SmartMoE shape, are weighed whole.)
local LARGE, SAMPLE_LAYERS = 16384, 4

local function loads_of(ctx)
  local loads = {}
  for l = 1, ctx.layers do
    loads[l] = {}
    for e = 1, ctx.experts do loads[l][e] = ctx.loads and ctx.loads[l] and ctx.loads[l][e] or 1 end
  end
  return loads
end

-- ctx with only the sampled layers (evenly spaced), or ctx itself when it is small.
local function weighed(ctx, loads)
  if ctx.layers * ctx.nodes * ctx.slots <= LARGE or ctx.layers <= SAMPLE_LAYERS then return ctx, loads, nil end
  local sub = { nodes = ctx.nodes, slots = ctx.slots, experts = ctx.experts, floor = ctx.floor, replicas = {}, loads = {} }
  local picked = {}
  for i = 1, SAMPLE_LAYERS do
    local l = math.floor((i - 1) * ctx.layers / SAMPLE_LAYERS) + 1
    sub.replicas[i], sub.loads[i], picked[i] = ctx.replicas[l], loads[l], l
  end
  sub.layers = SAMPLE_LAYERS
  return sub, sub.loads, picked
end

local function summary(p, score)
  return { point = p.name, balance = p.balance, median_balance = p.median, balances = p.balances, p = p.p,
           goodput = score.goodput, speed = score.speed, lost = score.lost }
end

-- The chosen point's placement (and figures) for every layer, when it was weighed on a sample.
local function build_all(ctx, loads, chosen)
  if chosen.name == "mro" then
    local all = sal.frontier(ctx.replicas, loads, ctx.nodes, ctx.slots, { floor = ctx.floor, only = {},
      include = { { name = "mro", placement = mro_layout.place(ctx) } }, placements = "all" })
    for _, p in ipairs(all.points) do if p.name == "mro" then return p end end
  end
  return sal.frontier(ctx.replicas, loads, ctx.nodes, ctx.slots,
                      { floor = ctx.floor, only = { chosen.name }, placements = "all" }).points[1]
end

local function decide(ctx)
  local loads = loads_of(ctx)
  local w, wloads, sampled = weighed(ctx, loads)
  local frontier = sal.frontier(w.replicas, wloads, w.nodes, w.slots, {
    floor = w.floor, include = { { name = "mro", placement = mro_layout.place(w) } },
    placements = sampled and "none" or "frontier" })
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
  if sampled then
    chosen = build_all(ctx, loads, chosen)
    score = goodput.score(chosen, ctx.failures, ctx.nodes)
  end
  local choice = summary(chosen, score)
  if other then choice.turned_down = summary(other, other_score) end
  choice.failures = { rate = ctx.failures.rate, source = ctx.failures.source, restore_s = ctx.failures.restore_s }
  choice.frontier = {}
  for _, p in ipairs(on) do choice.frontier[#choice.frontier + 1] = { point = p.name, balance = p.balance, p = p.p } end
  local note = goodput.explain(chosen, score, other, other_score, ctx.failures, ctx.nodes)
  if sampled then
    choice.weighed_on = sampled
    note = note .. string.format("; weighed on layers %s of %d", table.concat(sampled, ", "), ctx.layers)
  end
  return { placement = chosen.placement, choice = choice, note = note }
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

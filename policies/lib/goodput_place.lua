-- goodput_place.lua — the expected-goodput placement, shared by the shipped placements `goodput`
-- (the default) and `stepwise` (`local place = require "goodput_place"`; place.decide(ctx, opts)).
-- Of the placements that no other beats on both balance and recovery — the frontier (sal.frontier:
-- blocks of g experts on a node set, from mro's c down to 1, balance first, and mro's own layout,
-- the maximum-survival end) — it takes the one with the highest expected goodput (of those within
-- 0.2 % of it, the most survivable): the throughput an imbalance costs (the step waits for each
-- layer's busiest node) against the time that failures wiping out an expert cost (a restore from
-- peers or disk and the steps run again), at the failure rate the job sees or states (ctx.failures;
-- policies/lib/goodput.lua has the model). The proposal's note says what it chose, at what cost,
-- and the alternative it turned down (job.plan() shows it).
--
-- opts.steps (`stepwise`): the balance weighed is the steps'. With ctx.steps (the load window's
-- recent steps) each candidate is judged on every one of those steps split as the dispatcher splits
-- it (ctx.dispatch), because a step waits for its own busiest node, and layouts that all look even
-- on the window's mean loads differ by tens of percent there; chain and mixed, which pass a step's
-- excess on where closed blocks cannot, join the candidates. Without steps (the first plan), on the
-- loads.
--
-- With ctx.current (what each worker holds under the plan in force: a rebalance, a loss, a join)
-- the placement in force, changed only where the new replica counts and the loads require
-- (policies/lib/kept_place.lua), is weighed too, and kept when it moves fewer replicas than the
-- best point (sal.moves: after the driver's remap) unless re-placing is worth its moves: a
-- re-placement from scratch can move a third of the replicas or more (weights and optimizer state
-- sent between workers, on a GPU seconds) for a fraction of a percent. With ctx.moves (a replica's
-- fetch, measured, and how long a placement stands) it is worth them when the training time its
-- better goodput gains over that horizon exceeds what its extra fetches add to the plan switch;
-- without (before any switch moved experts, offline tools), when it gains more than KEEP.
local goodput = require "goodput"
local kept_place = require "kept_place"
local mro_layout = require "mro_layout"

local place = {}

-- The expected goodput a re-placement must gain over the placement in force to be worth its moves,
-- when nothing says what a move costs (no ctx.moves).
place.KEEP = 0.01

local function most_survivable(points)
  local best
  for _, p in ipairs(points) do
    if not best or goodput.survives_better(p, best) then best = p end
  end
  return best
end

-- A large plan (layers x nodes x slots x (slots + 1), the cells balanced times the constructions
-- weighed, above LARGE: e.g. one layer of 1024 nodes x 8 slots, or 4 layers of 16 nodes x 36 slots,
-- whose 37 constructions alone took over half a second) is weighed on the constructions with c,
-- c/2, ..., 1 experts per block and balance first (at 1024 nodes the others differ from their
-- neighbours by ~1e-6 in P(2)), on SAMPLE_LAYERS evenly spaced layers when it has more, and without
-- their placements; only the chosen construction is then
-- built for every layer. Its maximum-survival end is then blocks of c, mro's structure (the same
-- minimal node sets when the blocks fit, so the same P(1..3); mro's own repair of a cut-short tail
-- matters at 16 or more failures there) rather than mro's own layout. The whole frontier of every
-- layer of such a plan would take about half a second and its placements more memory than a policy
-- has. (24 layers on 16 nodes x 8 slots, the SmartMoE shape, are weighed whole.) The placement in
-- force, adjusted, is weighed on the same sampled layers, its moves and the best point's (built for
-- every layer) counted on all: before, a large plan was placed from scratch at every loss, and a
-- loss among 64 nodes of 24 layers moved 5 563 replicas (the busiest worker 124) where the placement
-- in force, adjusted, moves 404 (10). Chosen, its figures are then counted on every layer.
local LARGE, SAMPLE_LAYERS = 4096 * 9, 4
-- The slots (layers x nodes x slots) up to which a large plan weighs the placement in force: adjusting
-- it and counting both placements' moves take about 2 us a slot (40 layers of 511 nodes x 8 slots:
-- 0.3 s of the policy's 0.5 s budget on a 2-core VM, 1023 nodes over 0.5 s). Above, the plan is made
-- from scratch and the note says why.
local KEPT_SLOTS = 131072

local function is_large(ctx)
  return ctx.layers * ctx.nodes * ctx.slots * (ctx.slots + 1) > LARGE
end

local function loads_of(ctx)
  local loads = {}
  for l = 1, ctx.layers do
    loads[l] = {}
    for e = 1, ctx.experts do loads[l][e] = ctx.loads and ctx.loads[l] and ctx.loads[l][e] or 1 end
  end
  return loads
end

-- ctx with only the sampled layers (evenly spaced) and their numbers, or ctx itself.
local function weighed(ctx, loads)
  if not is_large(ctx) or ctx.layers <= SAMPLE_LAYERS then return ctx, loads, nil end
  local sub = { nodes = ctx.nodes, slots = ctx.slots, experts = ctx.experts, floor = ctx.floor, replicas = {}, loads = {} }
  local picked = {}
  for i = 1, SAMPLE_LAYERS do
    local l = math.floor((i - 1) * ctx.layers / SAMPLE_LAYERS) + 1
    sub.replicas[i], sub.loads[i], picked[i] = ctx.replicas[l], loads[l], l
  end
  sub.layers = SAMPLE_LAYERS
  return sub, sub.loads, picked
end

-- The constructions weighed: blocks of c .. 1 experts and balance first, with chain and mixed (the
-- layouts that pass a step's excess on) when judged on the steps.
local function constructions(slots, on_steps)
  local names = {}
  for g = slots, 1, -1 do names[#names + 1] = "blocks-" .. g end
  names[#names + 1] = "balance-first"
  if on_steps then
    names[#names + 1] = "chain"
    names[#names + 1] = "mixed"
  end
  return names
end

-- The constructions a large plan is weighed on: blocks of c, c/2, ..., 1 experts, and balance first.
local function halving(slots)
  local names, g = {}, slots
  while g >= 1 do
    names[#names + 1] = "blocks-" .. g
    g = math.floor(g / 2)
  end
  names[#names + 1] = "balance-first"
  return names
end

local function summary(p, score)
  return { point = p.name, balance = p.balance, median_balance = p.median, balances = p.balances,
           load_balance = p.load_balance, p = p.p, goodput = score.goodput, speed = score.speed, lost = score.lost }
end

local function point_named(points, name)
  for _, p in ipairs(points) do
    if p.name == name then return p end
  end
  return nil
end

-- Whether re-placing is not worth its moves (`moves`: both placements' fetches, total and the most
-- one worker makes; goodputs of the placement in force adjusted and of the best point). With
-- ctx.moves: the training time the best point gains over the horizon, (1 - kept / best) x
-- horizon_s, against what its extra fetches add to the switch — the busiest worker's extra, or the
-- extra spread evenly if more, at replica_s each (moves.gain_s, moves.cost_s). Without: whether the
-- best point's goodput is within KEEP. A best goodput of 0 (wipe-outs expected all the time) gains
-- nothing over the placement in force.
function place.keep_worth(ctx, moves, kept_goodput, best_goodput)
  local m = ctx.moves
  if not m then return kept_goodput >= best_goodput * (1 - place.KEEP) end
  local extra = math.max(moves.best_most - moves.kept_most, (moves.best - moves.kept) / ctx.nodes)
  moves.cost_s = math.max(0, extra) * m.replica_s
  local kept_share = best_goodput > 0 and kept_goodput / best_goodput or 1
  moves.gain_s = math.max(0, 1 - kept_share) * m.horizon_s
  return moves.gain_s <= moves.cost_s
end

-- The placement in force, adjusted (`kept`, its frontier point kept_point), against the best point
-- `chosen`: kept when it moves fewer replicas and re-placing is not worth its moves (keep_worth),
-- the best point then the alternative turned down. Returns chosen, score, other and the replicas
-- moved, {kept, kept_most, best, best_most, gain_s, cost_s} (best: nil when kept is the best point
-- itself; gain_s and cost_s with ctx.moves). best_placement: the best point's placement where the
-- point was weighed without it (a large plan's, built for every layer).
local function weigh_kept(ctx, kept, kept_point, chosen, score, other, best_placement)
  if not kept_point then return chosen, score, other, nil end
  local moves = {}
  moves.kept, moves.kept_most = sal.moves(ctx.current, kept)
  if kept_point == chosen then return chosen, score, other, moves end
  moves.best, moves.best_most = sal.moves(ctx.current, best_placement or chosen.placement)
  local kept_score = goodput.score(kept_point, ctx.failures, ctx.nodes)
  if moves.kept < moves.best and place.keep_worth(ctx, moves, kept_score.goodput, score.goodput) then
    return kept_point, kept_score, chosen, moves
  end
  return chosen, score, other, moves
end

-- What the weighing came to, in seconds when ctx.moves said what a fetch costs.
local function worth_text(ctx, moves, kept)
  if not moves.cost_s then
    return kept and string.format("re-placing gains less than %g %% expected goodput", 100 * place.KEEP) or nil
  end
  return string.format("re-placing gains %.3g s of training over the %.3g s a placement stands, its extra fetches "
                       .. "cost %.3g s of switch (%s)", moves.gain_s, ctx.moves.horizon_s, moves.cost_s,
                       ctx.moves.source)
end

local function kept_note(ctx, note, chosen, other, moves)
  local head = "the placement in force kept, adjusted to the new replica counts and loads"
  if chosen.name ~= "kept" then
    local why = worth_text(ctx, moves, false)
    return note .. string.format("; the placement in force, adjusted, turned down: %d replica(s) move here, %d there",
                                 moves.best, moves.kept) .. (why and "; " .. why or "")
  end
  if not moves.best then return string.format("%s (%d replica(s) move): %s", head, moves.kept, note) end
  return string.format("%s (%d replica(s) move, against %d for %s): %s; %s", head, moves.kept, moves.best,
                       other.name, note, worth_text(ctx, moves, true))
end

-- The placement's layers the weighing sees: those of `picked` (a large plan's sampled layers), or all.
local function layers_of(placement, picked)
  if not picked then return placement end
  local some = {}
  for i, l in ipairs(picked) do some[i] = placement[l] end
  return some
end

-- The chosen point's placement (and figures) for every layer, when it was weighed without them.
local function build_all(ctx, loads, chosen)
  return sal.frontier(ctx.replicas, loads, ctx.nodes, ctx.slots,
                      { floor = ctx.floor, only = { chosen.name }, placements = "all" }).points[1]
end

-- The placement in force's figures for every layer (its point, without the placement), when it
-- was weighed on a large plan's sampled layers.
local function kept_figures(ctx, loads, kept)
  return sal.frontier(ctx.replicas, loads, ctx.nodes, ctx.slots, {
    floor = ctx.floor, only = {}, include = { { name = "kept", placement = kept } }, placements = "none" }).points[1]
end

-- The steps a plan of this size is judged on (the last of ctx.steps), or nil: a large plan is
-- weighed on its loads. Each step costs a split of every layer for every candidate, about 20 us per
-- thousand experts x nodes; STEP_CELLS bounds steps x layers x experts x nodes so that the steps add
-- at most a few tens of milliseconds (16 steps on the drill job's 2 x 16 x 8, 10 on 24 layers of
-- 32 experts on 16 nodes).
local STEP_CELLS = 131072

local function steps_of(ctx, large)
  if large or not ctx.steps or #ctx.steps == 0 then return nil end
  local fit = math.max(1, math.floor(STEP_CELLS / (ctx.layers * ctx.experts * ctx.nodes)))
  if fit >= #ctx.steps then return ctx.steps end
  local last = {}
  for i = #ctx.steps - fit + 1, #ctx.steps do last[#last + 1] = ctx.steps[i] end
  return last
end

-- The placement for ctx: opts.steps judges the candidates on ctx.steps (and weighs chain and mixed
-- too), else on the mean loads.
function place.decide(ctx, opts)
  local loads = loads_of(ctx)
  local large = is_large(ctx)
  local w, wloads, sampled = weighed(ctx, loads)
  local include = large and {} or { { name = "mro", placement = mro_layout.place(w) } }
  local kept, refused
  if ctx.current and large and ctx.layers * ctx.nodes * ctx.slots > KEPT_SLOTS then
    refused = string.format("%d slots (%d layers x %d nodes x %d) are more than it is weighed on within the "
                            .. "policy's budget (%d)", ctx.layers * ctx.nodes * ctx.slots, ctx.layers, ctx.nodes,
                            ctx.slots, KEPT_SLOTS)
  elseif ctx.current then
    kept, refused = kept_place.adjust(ctx, loads)
  end
  if kept then include[#include + 1] = { name = "kept", placement = layers_of(kept, sampled) } end
  local steps = opts.steps and steps_of(ctx, large) or nil
  local frontier = sal.frontier(w.replicas, wloads, w.nodes, w.slots, {
    floor = w.floor, include = include, placements = large and "none" or "frontier",
    only = large and halving(w.slots) or constructions(w.slots, opts.steps), steps = steps, split = ctx.dispatch })
  local on = {}
  for _, p in ipairs(frontier.points) do
    if p.frontier then on[#on + 1] = p end
  end
  local chosen, score = goodput.best(on, ctx.failures, ctx.nodes)
  -- the alternative: the maximum-survival end, or, when that was chosen, the most balanced point
  local other = most_survivable(on)
  if other == chosen then other = on[1] end
  local moves, built
  if kept then
    local kept_point = point_named(frontier.points, "kept")
    if large and kept_point and kept_point ~= chosen then built = build_all(ctx, loads, chosen) end
    chosen, score, other, moves = weigh_kept(ctx, kept, kept_point, chosen, score, other, built and built.placement)
  end
  local other_score = other ~= chosen and goodput.score(other, ctx.failures, ctx.nodes) or nil
  if other == chosen then other = nil end
  if large and (chosen.name ~= "kept" or sampled) then  -- the chosen point's figures: the whole plan's
    chosen = chosen.name == "kept" and kept_figures(ctx, loads, kept) or built or build_all(ctx, loads, chosen)
    score = goodput.score(chosen, ctx.failures, ctx.nodes)
  end
  local choice = summary(chosen, score)
  if other then choice.turned_down = summary(other, other_score) end
  if moves then choice.moves = moves elseif refused then choice.kept_refused = refused end
  choice.failures = { rate = ctx.failures.rate, source = ctx.failures.source, restore_s = ctx.failures.restore_s }
  choice.frontier = {}
  for _, p in ipairs(on) do choice.frontier[#choice.frontier + 1] = { point = p.name, balance = p.balance, p = p.p } end
  local note = goodput.explain(chosen, score, other, other_score, ctx.failures, ctx.nodes)
  if moves then note = kept_note(ctx, note, chosen, other, moves) end
  if chosen.name == "kept" then chosen.placement = kept end
  if steps then
    choice.steps = #steps
    note = note .. string.format("; balance over the last %d steps as dispatched (on the mean loads %.3f)", #steps,
                                 chosen.load_balance)
  end
  if choice.kept_refused then note = note .. "; the placement in force was not weighed: " .. choice.kept_refused end
  if sampled then
    choice.weighed_on = sampled
    note = note .. string.format("; weighed on layers %s of %d", table.concat(sampled, ", "), ctx.layers)
  end
  return { placement = chosen.placement, choice = choice, note = note }
end

return place

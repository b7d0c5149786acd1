-- kept_place.lua — the placement in force, changed only as far as new replica counts and loads
-- require (`local kept_place = require "kept_place"`; kept_place.adjust(ctx, loads)). The shipped
-- `goodput` and `stepwise` weigh it beside the frontier when ctx.current is there (what each worker
-- of the new plan holds under the plan in force: a rebalance by load, a loss, a join): a
-- re-placement from scratch moves a third of the replicas or more every time, even when the loads
-- hardly changed or one node of many was lost, and each moved replica is an expert's weights and
-- optimizer state sent between workers.
--
-- Per layer: every expert the new allocation gives more replicas than the workers hold takes, one
-- by one (the most loaded per replica first), a free slot (a worker that joined, or the room a
-- lost worker's replicas leave) or a slot of an expert that has more than it needs now, on the
-- node with the least work after the swap (each expert's load split over its new replicas), a node
-- that does not hold it yet if there is one; a slot is given up only where its expert keeps the
-- spread the floor asks (min(floor, nodes, replicas) distinct nodes). The slots that may be given
-- wait in a heap by that work (policies/lib/heap.lua), so a replica looks at a few of them, not at
-- every slot: at 1023 nodes x 8 slots, 424 new replicas took 9 ms instead of 260 (bench_policy).
-- Then, while the loads have left the busiest node with more than its share, it trades a replica
-- with another node (two replicas move; neither node held the other's expert, so every spread is
-- kept) where that lowers the pair's larger work the most — on layers of more than PARTNERS nodes,
-- with one of the PARTNERS lightest — at most SWAPS_SHARE of the layer's slots' worth of trades
-- (and the plan's share of TRADE_WORK) and only while a trade takes at least MIN_GAIN of the mean
-- work off. Nothing else moves. Returns the placement, or nil and why (a current placement of
-- another shape, a spread that cannot be kept, or a layer too large for the search: MAX_WORK).
local heap = require "heap"

local kept_place = {}

-- The givable slots a layer's new replicas may look at, all told (in the worst case, where every
-- light node already holds the expert, each looks at most of them).
local MAX_WORK = 2000000
-- The trades that even out a layer: at most this share of its slots (each trade moves two
-- replicas), each taking at least MIN_GAIN of the mean node's work off the busiest node.
local SWAPS_SHARE, MIN_GAIN = 1 / 8, 0.005
-- The trades' work over the whole plan (nodes looked at per trade x trades x layers), and the nodes
-- a trade is sought with on a large layer (the lightest).
local TRADE_WORK, PARTNERS = 4000000, 32

local function need(ctx, reps)
  return math.min(ctx.floor or 1, ctx.nodes, reps)
end

-- The layer's state: a copy of the current slots (0: free), counts per expert and per node,
-- distinct nodes; or nil and why.
local function layer_state(cur, nodes, slots, experts)
  if type(cur) ~= "table" or #cur ~= nodes then
    return nil, string.format("%s nodes where the plan has %d", type(cur) == "table" and #cur or "no", nodes)
  end
  local st = { slots = {}, count = { [0] = 0 }, on = {}, span = { [0] = 0 } }
  for e = 1, experts do st.count[e], st.span[e] = 0, 0 end
  for n = 1, nodes do
    local row = cur[n]
    if type(row) ~= "table" or #row > slots then
      return nil, string.format("node %d holds more than %d slots", n, slots)
    end
    st.slots[n], st.on[n] = {}, {}
    for s = 1, slots do
      local e = row[s] or 0
      if type(e) ~= "number" or (e < 1 and row[s] ~= nil) or e > experts or e % 1 ~= 0 then
        return nil, string.format("node %d holds %s, not an expert of 1..%d", n, tostring(row[s]), experts)
      end
      st.slots[n][s] = e
      st.count[e] = st.count[e] + 1
      st.on[n][e] = (st.on[n][e] or 0) + 1
      if st.on[n][e] == 1 then st.span[e] = st.span[e] + 1 end
    end
  end
  return st
end

local function work_of(st, n, load_per)
  local w = 0
  for _, e in ipairs(st.slots[n]) do w = w + load_per[e] end
  return w
end

-- Whether slot s of node n may go to expert e: it is free, or its expert has more replicas than it
-- needs and giving this one up keeps its spread.
local function may_give(ctx, st, reps, n, s, e)
  local x = st.slots[n][s]
  if x == 0 then return true end
  if x == e or st.count[x] <= reps[x] then return false end
  return st.on[n][x] > 1 or st.span[x] - 1 >= need(ctx, reps[x])
end

local function swap(st, n, s, e)
  local x = st.slots[n][s]
  st.slots[n][s] = e
  st.count[x], st.count[e] = st.count[x] - 1, st.count[e] + 1
  st.on[n][x] = st.on[n][x] - 1
  if st.on[n][x] == 0 then st.span[x] = st.span[x] - 1 end
  st.on[n][e] = (st.on[n][e] or 0) + 1
  if st.on[n][e] == 1 then st.span[e] = st.span[e] + 1 end
end

-- Files slot s of node n in the heap `slots` under key (the node's work after giving the slot up;
-- ties: the lower node, then slot) as {key, n, s, the node's version}.
local function queue(ctx, slots, key, n, s)
  slots:push(key, (n - 1) * ctx.slots + s, { key, n, s, slots.version[n] })
end

-- The slots that may take a deficit replica — the free ones and those of experts with more
-- replicas than they need now (the only ones may_give can ever allow; a slot once given holds an
-- expert that needs it) — in a heap, the node with the least work after giving the slot up first.
-- Each entry carries its node's version (slots.version[n], one more each time the node's work
-- changes); an entry of an older version is stale.
local function givable_slots(ctx, st, reps, load_per, work)
  local slots = heap.new()
  slots.version = {}
  for n = 1, ctx.nodes do slots.version[n] = 0 end
  for n = 1, ctx.nodes do
    for s = 1, ctx.slots do
      local x = st.slots[n][s]
      if x == 0 or st.count[x] > reps[x] then queue(ctx, slots, work[n] - load_per[x], n, s) end
    end
  end
  return slots
end

-- Node n's work changed: its givable slots again, at the new work.
local function requeue(ctx, st, reps, load_per, work, slots, n)
  slots.version[n] = slots.version[n] + 1
  for s = 1, ctx.slots do
    local x = st.slots[n][s]
    if x == 0 or st.count[x] > reps[x] then queue(ctx, slots, work[n] - load_per[x], n, s) end
  end
end

-- The slot for one more replica of e, taken from `slots` (givable_slots): the least work after the
-- swap on a node that does not hold e yet, else on any: {key, n, s, version}, or nil. Entries that
-- can no longer be given (their expert down to what it needs, or its spread at the floor) are
-- dropped; those of nodes holding e go to the heap `aside` (while e's replicas are placed, they stay
-- there). `budget.pops` counts the entries looked at.
local function best_slot(ctx, st, reps, e, slots, aside, budget)
  while true do
    local c = slots:pop()
    if not c then break end
    budget.pops = budget.pops + 1
    local n, s = c[2], c[3]
    if c[4] == slots.version[n] and may_give(ctx, st, reps, n, s, e) then
      if (st.on[n][e] or 0) == 0 then return c end
      aside:push(c[1], (n - 1) * ctx.slots + s, c)
    end
  end
  while true do  -- every node with a slot to give holds e already: the least of those
    local c = aside:pop()
    if not c then return nil end
    budget.pops = budget.pops + 1
    if c[4] == slots.version[c[2]] and may_give(ctx, st, reps, c[2], c[3], e) then return c end
  end
end

-- The entries set aside for one expert, back in the heap for the next (stale ones dropped).
local function put_back(ctx, slots, aside)
  while true do
    local c = aside:pop()
    if not c then return end
    if c[4] == slots.version[c[2]] then slots:push(c[1], (c[2] - 1) * ctx.slots + c[3], c) end
  end
end

local function busiest(work)
  local b = 1
  for n = 2, #work do
    if work[n] > work[b] then b = n end
  end
  return b
end

-- The nodes a trade with b may be made with, in the order tried: every other node, or on a layer of
-- more than PARTNERS nodes the PARTNERS with the least work (the trades that lower b's the most are
-- with those; trying every node there would cost nodes x slots^2 a trade).
local function partners(work, b)
  local list = {}
  if #work <= PARTNERS + 1 then
    for n = 1, #work do
      if n ~= b then list[#list + 1] = n end
    end
    return list
  end
  for n = 1, #work do  -- the PARTNERS lightest, kept in order of work (ties: the lower node first)
    if n ~= b and (#list < PARTNERS or work[n] < work[list[#list]]) then
      local i = math.min(#list, PARTNERS - 1)
      while i >= 1 and work[list[i]] > work[n] do
        list[i + 1] = list[i]
        i = i - 1
      end
      list[i + 1] = n
    end
  end
  return list
end

-- The best trade of a replica on node b for one on a node of `with`: {n, sb, sn, larger work
-- after}, or nil.
local function best_trade(ctx, st, b, load_per, work, with)
  local best
  for sb = 1, ctx.slots do
    local x = st.slots[b][sb]
    for _, n in ipairs(with) do
      if (st.on[n][x] or 0) == 0 then
        for sn = 1, ctx.slots do
          local y = st.slots[n][sn]
          local d = load_per[x] - load_per[y]
          if d > 0 and (st.on[b][y] or 0) == 0 then
            local worse = math.max(work[b] - d, work[n] + d)
            if not best or worse < best[4] then best = { n, sb, sn, worse } end
          end
        end
      end
    end
  end
  return best
end

-- Trades that lower the busiest node's work, within the plan's share of TRADE_WORK.
local function even_out(ctx, st, load_per, work)
  local total = 0
  for n = 1, ctx.nodes do total = total + work[n] end
  local mean = total / ctx.nodes
  local cost = ctx.nodes + ctx.slots * math.min(ctx.nodes - 1, PARTNERS) * ctx.slots
  local most = math.min(math.floor(SWAPS_SHARE * ctx.nodes * ctx.slots),
                        math.floor(TRADE_WORK / (math.max(cost, 1) * math.max(ctx.layers or 1, 1))))
  for _ = 1, most do
    local b = busiest(work)
    local t = best_trade(ctx, st, b, load_per, work, partners(work, b))
    if not t or work[b] - t[4] < MIN_GAIN * mean then break end
    local n, sb, sn = t[1], t[2], t[3]
    local x, y = st.slots[b][sb], st.slots[n][sn]
    swap(st, b, sb, y)
    swap(st, n, sn, x)
    work[b], work[n] = work[b] - load_per[x] + load_per[y], work[n] - load_per[y] + load_per[x]
  end
end

local function adjust_layer(ctx, cur, reps, loads)
  local st, why = layer_state(cur, ctx.nodes, ctx.slots, ctx.experts)
  if not st then return nil, why end
  local load_per, deficits = { [0] = 0 }, {}
  for e = 1, ctx.experts do
    load_per[e] = (loads[e] or 1) / math.max(reps[e], 1)
    for _ = 1, reps[e] - st.count[e] do deficits[#deficits + 1] = e end
  end
  table.sort(deficits, function(a, b)
    if load_per[a] ~= load_per[b] then return load_per[a] > load_per[b] end
    return a < b
  end)
  local work = {}
  for n = 1, ctx.nodes do work[n] = work_of(st, n, load_per) end
  local slots, budget, aside = givable_slots(ctx, st, reps, load_per, work), { pops = 0 }, heap.new()
  for i, e in ipairs(deficits) do
    if i > 1 and deficits[i - 1] ~= e then put_back(ctx, slots, aside) end
    local at = best_slot(ctx, st, reps, e, slots, aside, budget)
    if not at then return nil, "no slot keeps every expert's spread" end
    if budget.pops > MAX_WORK then return nil, "too large a layer to weigh" end
    local n, s = at[2], at[3]
    work[n] = work[n] - load_per[st.slots[n][s]] + load_per[e]
    swap(st, n, s, e)
    requeue(ctx, st, reps, load_per, work, slots, n)
  end
  even_out(ctx, st, load_per, work)
  if st.count[0] > 0 then return nil, "slots left free" end
  for e = 1, ctx.experts do
    if st.count[e] ~= reps[e] or st.span[e] < need(ctx, reps[e]) then return nil, "the spread cannot be kept" end
  end
  return st.slots
end

-- ctx.current adjusted to ctx.replicas (loads: [layer][expert]): the placement, or nil and why.
function kept_place.adjust(ctx, loads)
  if type(ctx.current) ~= "table" or #ctx.current ~= ctx.layers then return nil, "no placement in force" end
  local placement = {}
  for l = 1, ctx.layers do
    local layer, why = adjust_layer(ctx, ctx.current[l], ctx.replicas[l], loads[l])
    if not layer then return nil, string.format("layer %d: %s", l, why) end
    placement[l] = layer
  end
  return placement
end

return kept_place

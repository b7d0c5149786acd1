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
-- spread the floor asks (min(floor, nodes, replicas) distinct nodes). Then, while the loads have
-- left the busiest node with more than its share, it trades a replica with another node (two
-- replicas move; neither node held the other's expert, so every spread is kept) where that lowers
-- the pair's larger work the most, at most SWAPS_SHARE of the layer's slots' worth of trades and
-- only while a trade takes at least MIN_GAIN of the mean work off. Nothing else moves. Returns the
-- placement, or nil and why (a current placement of another shape, a spread that cannot be kept,
-- or a layer too large for the search: MAX_WORK).
local kept_place = {}

-- Deficit replicas x candidate slots a layer may weigh (the search is quadratic in the worst case).
local MAX_WORK = 2000000
-- The trades that even out a layer: at most this share of its slots (each trade moves two
-- replicas), each taking at least MIN_GAIN of the mean node's work off the busiest node.
local SWAPS_SHARE, MIN_GAIN = 1 / 8, 0.005

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

-- The slot for one more replica of e: {n, s} or nil.
local function best_slot(ctx, st, reps, e, load_per, work)
  local best, best_key_new, best_work
  for n = 1, ctx.nodes do
    local fresh = (st.on[n][e] or 0) == 0
    for s = 1, ctx.slots do
      if may_give(ctx, st, reps, n, s, e) then
        local after = work[n] - load_per[st.slots[n][s]] + load_per[e]
        if not best or (fresh and not best_key_new) or (fresh == best_key_new and after < best_work) then
          best, best_key_new, best_work = { n, s }, fresh, after
        end
      end
    end
  end
  return best
end

local function busiest(work)
  local b = 1
  for n = 2, #work do
    if work[n] > work[b] then b = n end
  end
  return b
end

-- The best trade of a replica on node b for one elsewhere: {n, sb, sn, larger work after}, or nil.
local function best_trade(ctx, st, b, load_per, work)
  local best
  for sb = 1, ctx.slots do
    local x = st.slots[b][sb]
    for n = 1, ctx.nodes do
      if n ~= b and (st.on[n][x] or 0) == 0 then
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

-- Trades that lower the busiest node's work.
local function even_out(ctx, st, load_per, work)
  local total = 0
  for n = 1, ctx.nodes do total = total + work[n] end
  local mean = total / ctx.nodes
  local cost = ctx.slots * ctx.nodes * ctx.slots
  local most = math.min(math.floor(SWAPS_SHARE * ctx.nodes * ctx.slots), math.floor(MAX_WORK / math.max(cost, 1)))
  for _ = 1, most do
    local b = busiest(work)
    local t = best_trade(ctx, st, b, load_per, work)
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
  if #deficits * ctx.nodes * ctx.slots > MAX_WORK then return nil, "too large a layer to weigh" end
  table.sort(deficits, function(a, b)
    if load_per[a] ~= load_per[b] then return load_per[a] > load_per[b] end
    return a < b
  end)
  local work = {}
  for n = 1, ctx.nodes do work[n] = work_of(st, n, load_per) end
  for _, e in ipairs(deficits) do
    local at = best_slot(ctx, st, reps, e, load_per, work)
    if not at then return nil, "no slot keeps every expert's spread" end
    local n, s = at[1], at[2]
    work[n] = work[n] - load_per[st.slots[n][s]] + load_per[e]
    swap(st, n, s, e)
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

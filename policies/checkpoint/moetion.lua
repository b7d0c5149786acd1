-- moetion.lua — MoEtion's sparse checkpoint window (Algorithm 1): the smallest window W_sparse whose
-- per-iteration snapshot fits one iteration, operators in ascending popularity (least used experts
-- first, non-expert operators last). The order is kept until at least 25% of experts change their
-- activation frequency by more than 10% (sal.moetion_reorder), so snapshots stay consistent.
local built_from = nil   -- the popularity the current order was computed from

local function popularity(ops)
  local p = {}
  for i, op in ipairs(ops) do p[i] = op.popularity end
  return p
end

local function one_per_iteration(n)
  local slots = {}
  for i = 1, n do slots[i] = { i } end
  return { window = n, slots = slots }
end

local function decide(ctx)
  local now = popularity(ctx.operators)
  local ok, w = pcall(sal.moetion_window, ctx.operators, ctx.iteration_s, ctx.bandwidth)
  local window = ok and w.window or #ctx.operators
  -- kept while the popularity holds and its window is still the smallest that fits (the measured
  -- iteration and bandwidth say: train.snapshot_cpu_share cuts a CPU job's bandwidth)
  if ctx.current and built_from and #built_from == #now and ctx.current.window == window then
    if not sal.moetion_reorder(built_from, now) then return ctx.current end
  end
  built_from = now
  if not ok then return one_per_iteration(#ctx.operators) end   -- nothing fits: spread thinnest
  return { window = w.window, slots = w.iterations }
end

local function selftest(t)
  local ops = {}
  for i = 1, 8 do ops[i] = { name = "e" .. i, kind = "expert", full_bytes = 300, compute_bytes = 100, popularity = i } end
  ops[9] = { name = "dense", kind = "dense", full_bytes = 300, compute_bytes = 100, popularity = 0 }
  local ctx = { operators = ops, iteration_s = 1, bandwidth = 1400 }   -- 900 compute + 200 per full
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.window, 5, "the smallest window that fits: two operators a iteration")
  t.eq(p.slots[1][1], 1, "least popular expert first")
  t.eq(p.slots[p.window][#p.slots[p.window]], 9, "non-expert operators last")
end

return {
  api = 1, kind = "checkpoint", name = "moetion",
  doc = "MoEtion: smallest sparse window that fits an iteration, ascending popularity",
  decide = decide, selftest = selftest,
  save = function() return { built_from = built_from } end,
  restore = function(s) built_from = s.built_from end,
}

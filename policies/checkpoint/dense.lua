-- dense.lua — a dense checkpoint every EVERY iterations: all operators in full, at once. The
-- baseline sparse checkpointing is compared with (and the safest choice when snapshots are cheap).
local EVERY = 10

local function decide(ctx)
  local all = {}
  for i = 1, #ctx.operators do all[i] = i end
  return { window = 1, period = EVERY, slots = { all } }
end

local function selftest(t)
  local ctx = { operators = { { name = "a", full_bytes = 12, compute_bytes = 4 },
                              { name = "b", full_bytes = 12, compute_bytes = 4 } },
                iteration_s = 1, bandwidth = 100 }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.slots[1], { 1, 2 })
end

return {
  api = 1, kind = "checkpoint", name = "dense",
  doc = "every operator in full every 10 iterations",
  decide = decide, selftest = selftest,
}

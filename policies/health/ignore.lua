-- ignore.lua — the baseline: lockstep. Every worker keeps an even share of the work whatever its
-- speed, so a slow worker sets the pace of every step. The comparison point for `lighten`.
local function decide(ctx)
  local shares = {}
  for i = 1, #ctx.workers do shares[i] = 1 end
  return { shares = shares, note = "lockstep: every worker an even share" }
end

local function selftest(t)
  local ctx = { step = 100, workers = { { name = "1.0", node = 1, ratio = 2, slow = true, share = 1 },
                                        { name = "2.0", node = 2, ratio = 1, slow = false, share = 1 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.shares, { 1, 1 })
end

return {
  api = 1, kind = "health", name = "ignore",
  doc = "lockstep: a slow worker slows every step (the baseline)",
  decide = decide, selftest = selftest,
}

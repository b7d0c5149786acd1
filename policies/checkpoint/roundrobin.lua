-- roundrobin.lua — MoC-style partial checkpoints: operators in their fixed order (no popularity),
-- as many per iteration as fit the snapshot budget (iteration time x bandwidth, counting the
-- compute weights of the operators not snapshotted in full), cycling through all of them.
local function decide(ctx)
  local ops, budget = ctx.operators, ctx.iteration_s * ctx.bandwidth
  local compute_all = 0
  for _, op in ipairs(ops) do compute_all = compute_all + op.compute_bytes end
  local slots, current, bytes = {}, {}, compute_all
  for i, op in ipairs(ops) do
    local extra = op.full_bytes - op.compute_bytes
    if #current > 0 and bytes + extra > budget then
      slots[#slots + 1], current, bytes = current, {}, compute_all
    end
    current[#current + 1], bytes = i, bytes + extra
  end
  slots[#slots + 1] = current
  return { window = #slots, slots = slots }
end

local function selftest(t)
  local ops = {}
  for i = 1, 6 do ops[i] = { name = "op" .. i, full_bytes = 30, compute_bytes = 10 } end
  local ctx = { operators = ops, iteration_s = 1, bandwidth = 100 }   -- 60 compute + 20 per full
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.window, 3, "two operators a iteration fit the budget")
end

return {
  api = 1, kind = "checkpoint", name = "roundrobin",
  doc = "MoC-style partial snapshots: fixed order, as many per iteration as fit",
  decide = decide, selftest = selftest,
}

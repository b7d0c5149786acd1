-- replication.lua — traditional replication: groups in blocks of r, every member of a block hosts
-- all r shard types of its block; a lost group's shard is computed by the least busy survivor of
-- its block. A wipe-out needs a whole block lost.
local function decide(ctx)
  local n = ctx.groups
  local r = ctx.redundancy > 0 and ctx.redundancy or math.min(2, n)
  local hosts, assignment, wipeout = {}, {}, false
  for g = 1, n do
    local first = math.floor((g - 1) / r) * r + 1
    hosts[g] = {}
    for t = first, math.min(first + r - 1, n) do hosts[g][#hosts[g] + 1] = t end
    assignment[g] = {}
  end
  for t = 1, n do
    local best = nil
    for _, g in ipairs(hosts[t]) do   -- the members of t's block (hosts[t] lists the block)
      if ctx.alive[g] and (best == nil or #assignment[g] < #assignment[best]) then best = g end
    end
    if ctx.alive[t] then best = t end
    if best then
      assignment[best][#assignment[best] + 1] = t
    else
      wipeout = true
    end
  end
  if wipeout then for g = 1, n do assignment[g] = {} end end
  return { r = r, hosts = hosts, assignment = assignment, wipeout = wipeout }
end

local function selftest(t)
  local ctx = { groups = 4, alive = { true, false, true, true }, redundancy = 2 }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.assignment[1], { 1, 2 }, "the survivor of block 1 takes the lost shard")
  local gone = { groups = 4, alive = { false, false, true, true }, redundancy = 2 }
  t.ok(decide(gone).wipeout, "a whole block lost is a wipe-out")
end

return {
  api = 1, kind = "redundancy", name = "replication",
  doc = "traditional replication: blocks of r groups share their shards",
  decide = decide, selftest = selftest,
}

-- none.lua — no redundancy: group g holds shard g only; losing any group is a wipe-out (restart
-- from a checkpoint). The comparison point for replication and SPARe.
local function decide(ctx)
  local hosts, assignment, wipeout = {}, {}, false
  for g = 1, ctx.groups do
    hosts[g] = { g }
    assignment[g] = ctx.alive[g] and { g } or {}
    wipeout = wipeout or not ctx.alive[g]
  end
  return { r = 1, hosts = hosts, assignment = assignment, wipeout = wipeout }
end

local function selftest(t)
  local ctx = { groups = 3, alive = { true, false, true }, redundancy = 0 }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.ok(p.wipeout, "a lost group is a wipe-out")
end

return {
  api = 1, kind = "redundancy", name = "none",
  doc = "no redundancy: any lost group means a restart",
  decide = decide, selftest = selftest,
}

-- spare.lua — SPARe: every group hosts r shard types laid out by a cyclic Golomb ruler (no two types
-- share more than one host), r = r* ~ floor(log2 N + 0.833) unless the job asks for one. After
-- failures the reordering controller (sal.spare_reorder: HK-fixed, then HK-free, then min-cost
-- flow) finds the smallest all-reduce depth with the fewest stack changes. A patch spreads the
-- failed groups' shard types over every group still up (spread = true: each computes a part, so
-- the patch costs 1/(groups up) of a type rather than a whole type on one group): in this engine a
-- shard type is a function of (seed, step), not data resident on its hosts, so a type whose hosts
-- are all down is spread too, and only losing every group is a wipe-out. After a patched step the
-- job trains on degraded — the failed groups out, their types spread the same way — for as long as
-- that loses less time than a plan switch ("cheaper"); one more loss in them is patched again.
-- SPARe's own patch — each type whole on a host, a wipe-out when a type loses every host, the
-- survivors regrouped at once where some type is down to one host — is what a proposal gets that
-- leaves spread and after_patch out (docs/policies.md). An r the job asks for that no ruler gives
-- for N groups is an error (the rule in the message), not a smaller r.
local function feasible_r(n, r)
  while r > 1 and r * (r - 1) > n - 1 do r = r - 1 end   -- a ruler needs r(r-1) <= N-1
  return r
end

local function any_up(alive, n)
  for g = 1, n do
    if alive[g] then return true end
  end
  return false
end

local function decide(ctx)
  local n = ctx.groups
  if ctx.redundancy > 0 and feasible_r(n, ctx.redundancy) ~= ctx.redundancy then
    error(("spare cannot stack r = %d shard types over %d groups: a cyclic Golomb ruler of r marks needs "
      .. "r(r-1) = %d <= groups - 1 = %d"):format(ctx.redundancy, n, ctx.redundancy * (ctx.redundancy - 1), n - 1))
  end
  local r = feasible_r(n, ctx.redundancy > 0 and ctx.redundancy or sal.spare_r_star(n))
  local stacks
  if ctx.current and ctx.current.r == r and #ctx.current.hosts == n then
    stacks = ctx.current.hosts
  else
    stacks = sal.spare_layout(n, r)
  end
  local result = sal.spare_reorder(stacks, ctx.alive)
  local assignment = {}
  for g = 1, n do assignment[g] = {} end
  if result.outcome == "wiped_out" then
    if not any_up(ctx.alive, n) then
      return { r = r, hosts = result.stacks, assignment = assignment, wipeout = true, spread = true }
    end
    -- a type no group up hosts is spread with the lost groups' own: the others go to a host up each
    local taken = {}
    for g = 1, n do
      for _, t in ipairs(ctx.alive[g] and result.stacks[g] or {}) do
        if not taken[t] then taken[t], assignment[g][#assignment[g] + 1] = true, t end
      end
    end
    return { r = r, hosts = result.stacks, assignment = assignment, wipeout = false, after_patch = "cheaper",
             spread = true }
  end
  for g = 1, n do
    for _, t in ipairs(result.stacks[g]) do
      if result.provider[t] == g then assignment[g][#assignment[g] + 1] = t end
    end
  end
  return { r = r, hosts = result.stacks, assignment = assignment, wipeout = false, after_patch = "cheaper",
           spread = true }
end

local function selftest(t)
  local alive = {}
  for g = 1, 13 do alive[g] = true end
  local ctx = { groups = 13, alive = alive, redundancy = 4 }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(#p.hosts[1], 4)
  alive[3], alive[7] = false, false
  local q = decide({ groups = 13, alive = alive, redundancy = 4, current = p })
  t.valid(q, { groups = 13, alive = alive, redundancy = 4 })
  t.ok(not q.wipeout, "two failures are masked with r = 4")
  t.eq(q.after_patch, "cheaper")
  t.ok(q.spread, "a patch spreads the lost types over the groups up")
  local four = { true, true, true, true }
  four[2] = false
  local one_host = decide({ groups = 4, alive = four, redundancy = 2 })
  t.ok(not one_host.wipeout and one_host.after_patch == "cheaper", "a type left with one host trains on degraded")
  four[1] = false  -- groups 1 and 2 are type 2's only hosts with r = 2 over 4 (ruler {0, 1})
  local unhosted = decide({ groups = 4, alive = four, redundancy = 2 })
  t.valid(unhosted, { groups = 4, alive = four, redundancy = 2 })
  t.ok(not unhosted.wipeout, "a type no group up hosts is spread over the groups up, not wiped out")
  t.ok(decide({ groups = 4, alive = { false, false, false, false }, redundancy = 2 }).wipeout, "no group up: wiped out")
end

return {
  api = 1, kind = "redundancy", name = "spare",
  doc = "SPARe: Golomb-ruler shard stacks, reordered for the smallest depth",
  decide = decide, selftest = selftest,
}

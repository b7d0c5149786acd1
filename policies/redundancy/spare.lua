-- spare.lua — SPARe: every group hosts r shard types laid out by a cyclic Golomb ruler (no two types
-- share more than one host), r = r* ~ floor(log2 N + 0.833) unless the job asks for one. After
-- failures the reordering controller (sal.spare_reorder: HK-fixed, then HK-free, then min-cost
-- flow) finds the smallest all-reduce depth with the fewest stack changes. A patched step is
-- followed by degraded steps (SPARe trains on with the failed groups out, their shard types computed
-- by the groups the reordering names) for as long as they lose less time than a plan switch costs,
-- then the survivors regroup ("cheaper"; "degraded": until workers join or leave; "regroup": at once). An r the job asks for that no
-- ruler gives for N groups is an error (the rule in the message), not a smaller r.
local function feasible_r(n, r)
  while r > 1 and r * (r - 1) > n - 1 do r = r - 1 end   -- a ruler needs r(r-1) <= N-1
  return r
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
    return { r = r, hosts = result.stacks, assignment = assignment, wipeout = true }
  end
  for g = 1, n do
    for _, t in ipairs(result.stacks[g]) do
      if result.provider[t] == g then assignment[g][#assignment[g] + 1] = t end
    end
  end
  return { r = r, hosts = result.stacks, assignment = assignment, wipeout = false, after_patch = "cheaper" }
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
end

return {
  api = 1, kind = "redundancy", name = "spare",
  doc = "SPARe: Golomb-ruler shard stacks, reordered for the smallest depth",
  decide = decide, selftest = selftest,
}

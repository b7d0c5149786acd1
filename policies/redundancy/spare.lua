-- spare.lua — SPARe: every group hosts r shard types laid out by a cyclic Golomb ruler (no two types
-- share more than one host), r = r* ~ floor(log2 N + 0.833) unless the job asks for one. After
-- failures the reordering controller (sal.spare_reorder: HK-fixed, then HK-free, then min-cost
-- flow) finds the smallest all-reduce depth with the fewest stack changes. After a patched step:
-- where every shard type still has two groups up hosting it (one more group lost mid-step is still
-- masked), the job trains on degraded — the failed groups out, their types computed by the groups
-- the reordering names — for as long as that loses less time than a plan switch ("cheaper"); where
-- some type is down to one host, the survivors regroup at once ("regroup"), since the next plan
-- refills the groups and masks a failure again. An r the job asks for that no
-- ruler gives for N groups is an error (the rule in the message), not a smaller r.
local function feasible_r(n, r)
  while r > 1 and r * (r - 1) > n - 1 do r = r - 1 end   -- a ruler needs r(r-1) <= N-1
  return r
end

-- Whether every shard type some group hosts still has two hosts among the groups up.
local function masks_another(stacks, alive)
  local hosts = {}
  for g, types in ipairs(stacks) do
    for _, t in ipairs(types) do
      hosts[t] = (hosts[t] or 0) + ((alive[g] ~= false) and 1 or 0)
    end
  end
  for _, n in pairs(hosts) do
    if n < 2 then return false end
  end
  return true
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
  local after = masks_another(result.stacks, ctx.alive) and "cheaper" or "regroup"
  return { r = r, hosts = result.stacks, assignment = assignment, wipeout = false, after_patch = after }
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
  t.eq(q.after_patch, "cheaper")  -- every type keeps two hosts up: degraded steps are safe
  local four = { true, true, true, true }
  t.eq(decide({ groups = 4, alive = four, redundancy = 2 }).after_patch, "cheaper")
  four[2] = false
  t.eq(decide({ groups = 4, alive = four, redundancy = 2 }).after_patch, "regroup")  -- a type left with one host
end

return {
  api = 1, kind = "redundancy", name = "spare",
  doc = "SPARe: Golomb-ruler shard stacks, reordered for the smallest depth",
  decide = decide, selftest = selftest,
}

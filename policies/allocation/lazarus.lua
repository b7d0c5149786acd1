-- lazarus.lua — Lazarus's load-aware replica allocation (Eq. 1): experts in ascending load order,
-- each gets its share of the slots not yet given out, in proportion to its load among the
-- experts still to come, but never fewer than the floor f:
--     r_e = max(floor(t_e / sum_{e' >= e} t_e' * (N*c - sum_{e' < e} r_e')), f)
-- The most loaded expert takes whatever is left, so the replicas fill the N*c slots exactly.
-- When N*c < f*E the floor is lowered to floor(N*c/E), and the proposal's note says so; when the
-- floor takes every slot (N*c = f*E) while the loads are skewed, the note says that no replica
-- follows them.
local function allocate_layer(loads, slots_total, f)
  local order = sal.argsort(loads)            -- ascending load, ties by expert id
  local n = #order
  local rest_load = 0
  for _, t in ipairs(loads) do rest_load = rest_load + t end
  local replicas, given = {}, 0
  for i, e in ipairs(order) do
    local left = slots_total - given
    local r
    if i == n then
      r = left
    elseif rest_load > 0 then
      r = math.max(math.floor(loads[e] / rest_load * left), f)
    else
      r = math.max(math.floor(left / (n - i + 1)), f)   -- no load left to go by: share evenly
    end
    -- keep at least f for each expert still to come
    r = math.min(r, left - f * (n - i))
    replicas[e] = r
    given = given + r
    rest_load = rest_load - loads[e]
  end
  return replicas
end

-- Whether some layer's busiest expert has over 10 % more than the layer's mean load.
local function skewed(loads)
  for _, layer in ipairs(loads) do
    local sum, most = 0, 0
    for _, t in ipairs(layer) do
      sum, most = sum + t, math.max(most, t)
    end
    if sum > 0 and most > 1.1 * sum / #layer then return true end
  end
  return false
end

-- When the floor takes every slot, no expert gets a replica for its load, however skewed the loads:
-- where they are skewed, the note says so, and what would give the loads room.
local function no_room_note(ctx)
  if ctx.nodes * ctx.slots > ctx.floor * ctx.experts or not skewed(ctx.loads) then return nil end
  return string.format("the floor takes every slot (%d x %d slots for %d experts at f = %d): no expert has a "
                       .. "replica for its load; more nodes, more policies.slots or a lower policies.min_replicas "
                       .. "would give the loads room", ctx.nodes, ctx.slots, ctx.experts, ctx.floor)
end

local function decide(ctx)
  local replicas = {}
  for l = 1, ctx.layers do
    replicas[l] = allocate_layer(ctx.loads[l], ctx.nodes * ctx.slots, ctx.floor)
  end
  local notes = {}
  if ctx.floor_note ~= "" then notes[#notes + 1] = ctx.floor_note end
  notes[#notes + 1] = no_room_note(ctx)
  return { replicas = replicas, floor = ctx.floor, note = #notes > 0 and table.concat(notes, "; ") or nil }
end

local function selftest(t)
  local ctx = { nodes = 4, slots = 4, experts = 4, layers = 1, min_replicas = 2, floor = 2, floor_note = "",
                loads = { { 10, 70, 0, 20 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  local r = p.replicas[1]
  t.eq(r[1] + r[2] + r[3] + r[4], 16, "fills N*c slots")
  t.ok(r[2] >= r[4] and r[4] >= r[1] and r[1] >= r[3], "more load, more replicas")
  t.ok(r[3] == 2, "an idle expert keeps the floor")
  local tight = { nodes = 2, slots = 3, experts = 4, layers = 1, min_replicas = 2, floor = 1,
                  floor_note = "f lowered from 2 to 1", loads = { { 1, 1, 1, 1 } } }
  local q = decide(tight)
  t.valid(q, tight)
  t.eq(q.note, "f lowered from 2 to 1")
  t.ok(p.note == nil, "slots beyond the floor: nothing to say")
  local full = { nodes = 2, slots = 4, experts = 4, layers = 1, min_replicas = 2, floor = 2, floor_note = "",
                 loads = { { 70, 10, 10, 10 } } }
  local r2 = decide(full)
  t.valid(r2, full)
  t.ok(r2.note:find("the floor takes every slot", 1, true) == 1, "a floor that takes every slot is said")
  full.loads = { { 10, 10, 10, 10 } }
  t.ok(decide(full).note == nil, "... where the loads are skewed")
end

return {
  api = 1, kind = "allocation", name = "lazarus",
  doc = "Lazarus Eq. 1: replicas in proportion to load, at least f each, filling every slot",
  decide = decide, selftest = selftest,
}

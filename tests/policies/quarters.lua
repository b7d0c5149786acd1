-- quarters.lua — a test checkpoint policy: a window of four iterations, the operators dealt to its
-- slots in turn, so that a restore from it replays three iterations with operators frozen (t0550).
local function decide(ctx)
  local slots = { {}, {}, {}, {} }
  for i = 1, #ctx.operators do table.insert(slots[(i - 1) % 4 + 1], i) end
  return { window = 4, slots = slots }
end

return {
  api = 1, kind = "checkpoint", name = "quarters",
  doc = "four slots, the operators dealt in turn (tests)",
  decide = decide,
}

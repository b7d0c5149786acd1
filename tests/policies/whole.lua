-- whole.lua — a test checkpoint policy: a window of one iteration, every operator in full in its one
-- slot, so that a restore from the newest window is the state the survivors already hold (t0556).
local function decide(ctx)
  local slot = {}
  for i = 1, #ctx.operators do slot[i] = i end
  return { window = 1, slots = { slot } }
end

return {
  api = 1, kind = "checkpoint", name = "whole",
  doc = "one slot, every operator in full (tests)",
  decide = decide,
}

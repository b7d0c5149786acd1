-- lose_expert.lua — the last rung of the recovery ladder: every node holding expert 0 of layer 0
-- is killed at once, so no replica of it survives; the newest dense snapshot is restored (the steps
-- after it run again) and training goes on. Replacement nodes join at the same time.
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/lose_expert.lua
drill{ name = "lose-every-replica", steps = 90, seed = 1 }
kill{ expert = 0, layer = 0, step = 50 }
add{ count = 2, step = 50 }
expect{ min_restores = 1, resume_s = 10 }

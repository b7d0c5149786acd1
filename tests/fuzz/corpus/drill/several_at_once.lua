-- several_at_once.lua — Lazarus §6.3: several nodes fail at the same moment. With two replicas of
-- every expert, losing three of eight nodes at once may take every replica of some expert: then
-- the dense snapshot is restored and the steps after it run again. Either way training goes on.
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/several_at_once.lua [--drill-arg count=3]
local count = tonumber(args.count or "3")
drill{ name = "several-at-once", steps = 120, seed = tonumber(args.seed or "7") }
kill{ node = "random", count = count, step = 50 }
add{ count = count, step = 80 }   -- the capacity comes back later, as spot nodes do
expect{ resume_s = 10 }

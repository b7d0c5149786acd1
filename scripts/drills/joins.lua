-- joins.lua — capacity that comes and goes with notice, the way a spot fleet rotates its nodes: six
-- times, a node is drained (it finishes its step and leaves) and a fresh one joins six steps
-- later. Each join puts a new worker process into the next plan, whose first step is that
-- process's first step ever; compare the join plans' first steps with train.warm_up on and off
-- (docs/performance.md, "A new worker's first step"):
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/joins.lua --cpu-share 0.22 \
--     [--set train.warm_up=false] [--drill-arg every=18,times=6]
local every = tonumber(args.every or "18")
local times = tonumber(args.times or "6")
drill{ name = "joins", steps = 12 + every * times + 10, seed = tonumber(args.seed or "3") }
for i = 0, times - 1 do
  drain{ node = "random", count = 1, step = 12 + every * i }
  add{ count = 1, step = 18 + every * i }
end
expect{ lost_steps = 0, restores = 0 }

-- one_every_n.lua — Lazarus §6.2: one node fails every N steps until half the nodes are gone.
-- Expect no committed step lost and every recovery within a few seconds.
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/one_every_n.lua [--drill-arg every=20,nodes=8]
-- With during=forward|alltoall|backward|allreduce each node dies at that point of the step instead
-- of at the step boundary: in a grouped job (scripts/jobs/groups8.lua) that is where a redundancy
-- policy patches the step (spare) or the step aborts (none).
local every = tonumber(args.every or "20")
local nodes = tonumber(args.nodes or "8")
local failures = math.floor(nodes / 2)
drill{ name = "one-every-" .. every .. "-steps", steps = every * (failures + 1), seed = 1 }
for i = 1, failures do
  kill{ node = "random", step = every * i, during = args.during }
end
expect{ lost_steps = 0, restores = 0, resume_s = 5, min_throughput_share = 0.25 }

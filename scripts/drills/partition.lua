-- partition.lua — a network partition: a node's link is cut (the node stays alive, cut off) and
-- restored. The controller declares it dead within the liveness window and trains on without it;
-- the cut-off node fences (stops stepping, commits nothing); when the link returns it registers
-- again, as a join, and trains with the others.
--   salamander run --drill scripts/drills/partition.lua [--drill-arg at_s=2,for_s=3]
-- As root: `salamander run` puts its controller and each agent in a network namespace of its own,
-- joined by veth pairs, so a cut is a real one (`ip link set … down`).
local at = tonumber(args.at_s or "3")
local cut = tonumber(args.for_s or "3")
drill{ name = "partition", duration_s = at + cut + 5, seed = 1 }
partition{ node = "random", at_s = at, for_s = cut }
expect{ lost_steps = 0, restores = 0 }

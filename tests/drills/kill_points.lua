-- kill_points.lua — t0510's drill: nodes die at each point of a step where a crash hurts most —
-- in the forward pass, in a state migration, in the all-to-all, in the gradient all-reduce — and
-- each time training must resume at the step it was on, losing nothing. Two nodes join from the
-- start so that every expert keeps two replicas (8 experts x 2 = 16 slots = 4 nodes x 4 slots);
-- the migration kill hits a node sending state to them when they join (with the job's tiny steps
-- the whole drill lasts about a second, so a later switch that moves state may come only after
-- the other kills, when a sender can hold an expert's last replica).
drill{ name = "kill-points", steps = 16, seed = 5 }
add{ count = 2, step = 0 }
kill{ node = "random", step = 0, during = "migration" }  -- a node sending state to the joining nodes
kill{ node = "random", step = 3, during = "forward" }  -- a rank of the plan in force
kill{ node = "random", step = 8, during = "alltoall" }
kill{ node = "random", step = 12, during = "allreduce" }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

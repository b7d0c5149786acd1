-- kill_points.lua — t0510's drill: nodes die at each point of a step where a crash hurts most —
-- in the forward pass, in a state migration, in the all-to-all, in the gradient all-reduce — and
-- each time training must resume at the step it was on, losing nothing. Two nodes join midway so
-- that every expert keeps two replicas (8 experts x 2 = 16 slots = 4 nodes x 4 slots).
drill{ name = "kill-points", steps = 16, seed = 5 }
kill{ node = 2, step = 3, during = "forward" }
kill{ node = "random", step = 3, during = "migration" }  -- a node sending state when node 2 is replaced
add{ count = 2, step = 5 }
kill{ node = "random", step = 8, during = "alltoall" }
kill{ node = "random", step = 12, during = "allreduce" }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

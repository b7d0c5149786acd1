-- lose_expert_peers_early.lua — t0556's drill: one fresh node joins and waits (the job's join batch
-- is longer than the run); in step 12, as its gradient synchronisation begins, node 1 dies — in a
-- job that keeps one replica of each expert, so its experts have no copy left. The newest window in
-- the agents' memory is then that of step 11, the state the survivors hold: they keep it, and fetch
-- only the lost experts.
drill{ name = "lose-expert-peers-early", steps = 20, seed = 3 }
add{ count = 1, step = 3 }
kill{ node = 1, step = 12, during = "allreduce" }
expect{ restores = 1, resume_s = 20 }

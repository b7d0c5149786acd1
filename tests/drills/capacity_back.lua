-- capacity_back.lua — t0516's second drill: one of two nodes is killed, the one left cannot plan
-- (its 4 slots cannot hold the 8 experts), and about two seconds later a fresh node joins: training
-- goes on, and the recovery's time waiting for it is counted apart from the engine's own.
drill{ name = "capacity-back", steps = 60, seed = 5 }
kill{ node = 1, step = 5 }
add{ count = 1, at_s = 2.5 }
expect{ resume_s = 10 }

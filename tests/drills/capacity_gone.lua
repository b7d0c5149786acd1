-- capacity_gone.lua — t0516's first drill: one of two nodes is killed; the one left cannot hold
-- the model's 8 experts in its 4 slots, so no plan can be made and the job waits for capacity
-- (mesh.capacity_wait_ms, short in the test) and then ends, failed, saying why.
drill{ name = "capacity-gone", steps = 100000, seed = 5 }
kill{ node = 1, step = 5 }

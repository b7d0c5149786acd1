-- end_kill.lua — a node killed at the moment the drill ends: the job's final checkpoint begins as
-- the node dies, and the workers left write it again (t0524).
drill{ name = "end-kill", steps = 100000, duration_s = 2, seed = 3 }
kill{ node = "random", at_s = 2 }

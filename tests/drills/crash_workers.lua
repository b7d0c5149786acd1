-- crash_workers.lua — t0525's drill: worker processes crash on healthy hosts (their agents live
-- on): one after 1 s of training, two more after 4 s. Each agent starts a new worker in its
-- crashed worker's place (0.5 s later), and the job takes it in again; no step is lost.
drill{ name = "crash-workers", steps = 1000000, duration_s = 9, seed = 5 }
crash{ node = "random", at_s = 1 }
crash{ node = "random", at_s = 4, count = 2 }
expect{ lost_steps = 0 }

-- freeze_drain.lua — t0514's drill: a node freezes (SIGSTOP) long enough to be declared dead and
-- comes back (SIGCONT) to join again; later another is preempted with notice (drain) and leaves
-- after its step. Neither costs a committed step.
drill{ name = "freeze-drain", steps = 400, seed = 4 }
freeze{ node = 2, step = 5, ms = 800 }
-- well after the thawed node has rejoined (its join waits mesh.join_batch_ms): this tiny model's
-- steps take 3-4 ms on an idle machine, so 150 steps could end before the thaw at 800 ms
drain{ node = 3, step = 380 }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

-- host_kill.lua — t0518's drill: four hosts of two workers each, and one host (its agent and both
-- of its workers) killed at once mid-run. With room for every expert on two hosts, the plan keeps
-- each expert's replicas on two hosts, so the survivors still hold every expert: nothing is restored
-- and no committed step is lost.
drill{ name = "host-kill", steps = 40, seed = 7 }
kill{ node = 1, step = 15 }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

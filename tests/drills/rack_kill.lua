-- rack_kill.lua — t0521's drill: four hosts of two workers in two racks (mesh.racks), and one rack
-- (both its hosts, all four of their workers) killed at once mid-run. With room for every expert on
-- both racks, the plan keeps each expert's replicas on two racks, so the survivors still hold every
-- expert: nothing is restored and no committed step is lost.
drill{ name = "rack-kill", steps = 40, seed = 7 }
kill{ rack = "b", step = 15 }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

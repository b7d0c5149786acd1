-- gpu_shared.lua — t0620's drill: two workers share GPU 0 (mesh.nodes = 2, mesh.devices =
-- "cuda:0", every expert on both); one node dies in the all-to-all of step 20, with the other
-- blocked in the same exchange. The survivor holds every expert, so training goes on alone at the
-- step it was on, losing nothing.
drill{ name = "gpu-shared", steps = 60, seed = 1 }
kill{ node = 1, step = 20, during = "alltoall" }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

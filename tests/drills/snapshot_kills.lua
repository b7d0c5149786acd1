-- snapshot_kills.lua — t0515's drill: a node dies in the middle of every dense snapshot (the job
-- snapshots every 5 steps): each victim has copied its units and writes none. The victims are the
-- lowest node of the plan each time — rank 0, a writer of experts and of non-expert units —
-- so every snapshot must complete from the second holders' copies, and training loses no step.
drill{ name = "snapshot-kills", steps = 20, seed = 3 }
kill{ node = 1, step = 4, during = "snapshot" }   -- the snapshot of step 5
kill{ node = 2, step = 9, during = "snapshot" }   -- of step 10
kill{ node = 3, step = 14, during = "snapshot" }  -- of step 15
expect{ lost_steps = 0 }

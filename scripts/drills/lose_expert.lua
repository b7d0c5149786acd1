-- lose_expert.lua — the restoring rungs of the recovery ladder: every node holding expert 0 of
-- layer 0 is killed at once, so no replica of it survives; the newest window of sparse snapshots in
-- the surviving agents' memory is restored and replayed (no committed step lost), or, with
-- train.peer_copies = 0, the newest dense snapshot on disk (the steps after it run again), and
-- training goes on. Replacement nodes join at the same time. With train.expert_logs = true the lost
-- experts are rebuilt alone from their snapshots and the upstream logs: nobody rolls back. drill8's
-- share of an iteration for the sparse snapshots (train.snapshot_cpu_share = 0.2) makes their window
-- longer than its dense snapshots every 5 steps are worth, so it mostly takes none (checkpoints.md);
-- with the share at 0 it takes them every iteration:
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/lose_expert.lua --set train.snapshot_cpu_share=0
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/lose_expert.lua --set train.expert_logs=true
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/lose_expert.lua --set train.peer_copies=0
drill{ name = "lose-every-replica", steps = 90, seed = 1 }
kill{ expert = 0, layer = 0, step = 50 }
add{ count = 2, step = 50 }
expect{ min_restores = 1, resume_s = 10 }

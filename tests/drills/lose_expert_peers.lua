-- lose_expert_peers.lua — t0550's drill: three fresh nodes join (and wait: the job's join batch is
-- longer than the run), then every node holding expert 3 of layer 0 is killed at once, so no
-- replica of it is left; the window of sparse snapshots in the surviving agents' memory must
-- restore it, on the survivors and the three that joined.
drill{ name = "lose-expert-peers", steps = 130, seed = 3 }
add{ count = 3, step = 17 }
kill{ expert = 3, layer = 0, step = 117 }
expect{ restores = 1, resume_s = 20 }  -- a restore from peers' memory counts as a restore (docs/drills.md)

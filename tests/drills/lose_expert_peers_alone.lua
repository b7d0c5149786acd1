-- lose_expert_peers_alone.lua — t0552's drill: every node holding expert 3 of layer 0 is killed and
-- nobody joins; the survivors restore the window from their agents' memory and go on, fewer.
drill{ name = "lose-expert-peers-alone", steps = 30, seed = 3 }
kill{ expert = 3, layer = 0, step = 17 }
expect{ min_restores = 1, resume_s = 20 }

-- lose_expert.lua — t0511's drill: every node holding expert 3 of layer 0 is killed at once, so no
-- replica of it is left; the dense-snapshot fallback must restore and training must go on (two
-- fresh nodes join to make room again).
drill{ name = "lose-expert", steps = 30, seed = 3 }
kill{ expert = 3, layer = 0, step = 17 }
add{ count = 2, step = 17 }
expect{ min_restores = 1, resume_s = 20 }

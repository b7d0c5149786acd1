-- drill8.lua — the job the shipped drills run on: the quickstart model on a local mesh of 8 CPU
-- nodes (the drills' sizes follow Lazarus's evaluation, scaled to one machine). Dense snapshots
-- every 20 steps are the last rung of the recovery ladder.
return {
  name = "drill8",
  model = {
    layers = 2, d_model = 64, heads = 4,
    experts = 8, top_k = 2,
    seq_len = 64, vocab = 256,
  },
  data = { path = "/usr/share/games/fortunes", format = "bytes" },
  train = {
    steps = 100000,        -- drills decide when to stop (drill{steps} or their duration)
    batch = 16, lr = 1e-2, warmup = 30, seed = 1,
    rebalance_every = 50,
    checkpoint_every = 20, -- dense snapshots (the fallback when an expert loses every replica)
    recovery = "elastic",  -- or the baselines: "fixed-ep-ft", "checkpoint-restart"
  },
  mesh = { nodes = 8, devices = "cpu:1", heartbeat_ms = 100, miss_limit = 3 },
  policies = {
    allocation = "lazarus", placement = "mro",
    min_replicas = 2, slots = 4,
  },
}

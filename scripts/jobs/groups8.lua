-- groups8.lua — the grouped job (parallel.groups): the quickstart model on 8 local CPU nodes in 4
-- data-parallel groups of 2, each a whole model; SPARe stacks 2 of the 4 shard types on every
-- group, so a group that fails in the middle of a step is covered by the others. Drills of the
-- redundancy policies run on it (scripts/drills/).
return {
  name = "groups8",
  model = {
    layers = 2, d_model = 64, heads = 4,
    experts = 8, top_k = 2,
    seq_len = 64, vocab = 256,
  },
  data = { path = "/usr/share/games/fortunes", format = "bytes" },
  train = {
    steps = 100000,        -- drills decide when to stop
    batch = 16, lr = 1e-2, warmup = 30, seed = 1,
    rebalance_every = 50,
    checkpoint_every = 20,
  },
  parallel = { groups = 4, redundancy = 2 },
  mesh = { nodes = 8, devices = "cpu:1", heartbeat_ms = 100, miss_limit = 3 },
  policies = {
    allocation = "lazarus", placement = "mro", redundancy = "spare",
    min_replicas = 2, slots = 8,   -- a group of one worker still holds every expert
  },
}

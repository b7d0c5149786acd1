-- quickstart.lua — the default job: a small MoE language model on a local mesh of 4 CPU nodes.
-- `salamander run` with no job file runs this one (it is compiled into the binary).
-- Every key is checked: `salamander job schema` lists them all with their rules and defaults.
return {
  name = "quickstart",
  model = {
    layers = 2, d_model = 64, heads = 4,
    experts = 8, top_k = 2,
    seq_len = 64, vocab = 256,
  },
  -- Debian's fortune cookie files: real English text (scripts/dev.sh installs the package)
  data = { path = "/usr/share/games/fortunes", format = "bytes" },
  train = {
    steps = 600, batch = 16, lr = 1e-2, warmup = 30, seed = 1,
    rebalance_every = 50,  -- re-plan replicas on the recent expert loads every 50 steps
  },
  mesh = {
    nodes = 4,             -- local agents started by `salamander run`
    devices = "cpu:1",     -- one CPU worker per node
    heartbeat_ms = 100,    -- a silent node is dead after miss_limit missed heartbeats
    miss_limit = 3,
  },
  repl = { budget_ms = 1000 },
  policies = {
    allocation = "lazarus", placement = "goodput",
    checkpoint = "moetion", redundancy = "none",
    min_replicas = 2, slots = 6,  -- 4 nodes x 6 = 24 slots a layer: 16 for the floor of 2 replicas
                                  -- of 8 experts, 8 spare for more replicas of the popular ones
  },
}

-- llama.lua — a moe-llama model (docs/models.md): RMSNorm, rotary positions, grouped-query
-- attention, SwiGLU experts with a shared expert, a sigmoid router with renormalised top-k, an
-- untied head; about 3.5 million parameters, on a local mesh of 4 CPU nodes. On byte-level text
-- as shipped; for a sentencepiece tokenizer, prepare the corpus first (docs/models.md: Data) and
-- set data.format, data.path and model.vocab.
return {
  name = "llama",
  model = {
    kind = "moe-llama",
    layers = 4, d_model = 128, heads = 8, kv_heads = 2,
    experts = 16, top_k = 4, expert_ffn = 128, shared_experts = 1,
    router = "sigmoid", norm_topk = true, z_loss_weight = 0.001,
    tied_head = false,
    seq_len = 128, vocab = 256,
  },
  data = { path = "/usr/share/games/fortunes", format = "bytes", validation = 0.02 },
  train = {
    steps = 300, batch = 16, lr = 3e-3, warmup = 30, seed = 1,
    eval_every = 50, eval_sequences = 32,
    rebalance_every = 50,
  },
  mesh = { nodes = 4, devices = "cpu:1", heartbeat_ms = 100, miss_limit = 3 },
  policies = {
    allocation = "lazarus", placement = "goodput",
    checkpoint = "moetion", redundancy = "none",
    min_replicas = 2, slots = 12,  -- 4 nodes x 12 = 48 slots a layer: 32 for the floor of 2 replicas of 16
  },
}

-- gpu_llama.lua — one worker on one GPU training the moe-llama family (docs/models.md): RMSNorm,
-- rotary positions, grouped-query attention (12 query heads over 4 key/value heads) with QK-norm,
-- SwiGLU experts with a shared one, a sigmoid router with renormalised top-2, an untied head, at
-- gpu_quickstart's width (d = 768, 4 layers, 8 experts) on bytes of English text.
--   salamander run scripts/jobs/gpu_llama.lua
-- Not yet run on a GPU (docs/gpu.md: its tests passed under a CPU emulation of CUDA). What GPU
-- workers do not build yet is refused when the file is read: the routing bias (model.bias_update),
-- top_k above 8, micro-batches and the validation loss.
return {
  name = "gpu_llama",
  model = {
    kind = "moe-llama",
    layers = 4, d_model = 768, heads = 12, kv_heads = 4, qk_norm = true,
    experts = 8, top_k = 2, expert_ffn = 2048, shared_experts = 1,
    router = "sigmoid", norm_topk = true, z_loss_weight = 0.001,
    tied_head = false,
    seq_len = 256, vocab = 256,
  },
  -- Debian's fortune cookie files, as gpu_quickstart.lua (on the lent GPU machines the carried .deb
  -- unpacks them under /tmp/deps/usr/share/games/fortunes: point data.path there)
  data = { path = "/usr/share/games/fortunes", format = "bytes" },
  train = {
    steps = 300, batch = 32, lr = 2e-3, warmup = 20, seed = 1,
    rebalance_every = 100,
    checkpoint_every = 100,
  },
  mesh = {
    nodes = 1,
    devices = "cuda:0",
  },
  policies = {
    min_replicas = 1,
    slots = 8,              -- the one worker holds all 8 experts of each layer
  },
}

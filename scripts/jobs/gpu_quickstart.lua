-- gpu_quickstart.lua — one worker on one GPU: a GPT-S-width MoE language model (Lazarus Table 1's
-- GPT-S: d = 768, 8 experts, top-2) with 4 layers instead of 12, on bytes of English text.
--   salamander run scripts/jobs/gpu_quickstart.lua
-- About 160 M parameters (2.6 GB of fp32 weights, gradients and Adam moments on the GPU; the
-- weights and moments again on the host, where checkpoints and migrations go through, and once
-- more in pinned memory, where snapshots are copied to while the next step runs). Each step is 32 sequences
-- of 256 bytes. One worker here; several (mesh.nodes > 1, or several devices) exchange over Gloo
-- with host staging, the NCCL data plane between GPUs not being built yet (docs/gpu.md).
return {
  name = "gpu_quickstart",
  model = {
    layers = 4, d_model = 768, heads = 12,
    experts = 8, top_k = 2,
    seq_len = 256, vocab = 256,
  },
  -- Debian's fortune cookie files, as quickstart.lua (on the lent GPU machines the carried .deb
  -- unpacks them under /tmp/deps/usr/share/games/fortunes: point data.path there)
  data = { path = "/usr/share/games/fortunes", format = "bytes" },
  train = {
    steps = 300, batch = 32, lr = 2e-3, warmup = 20, seed = 1,
    rebalance_every = 100,  -- one worker holds every expert: a re-plan moves nothing
    checkpoint_every = 100, -- a snapshot copies the model to pinned memory (about 1.9 GB with the moments)
  },
  mesh = {
    nodes = 1,
    devices = "cuda:0",     -- one worker, on GPU 0
  },
  policies = {
    min_replicas = 1,
    slots = 8,              -- the one worker holds all 8 experts of each layer
  },
}

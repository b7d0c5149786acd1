-- lazarus_jct.lua — Lazarus's simulation (Wu et al., §7): a DeepSeek-V3-like MoE (256 experts per
-- layer, top-8, 58 MoE layers simulated as 2 layers of weight 29) trained on 256, 512 and 1024 GPUs
-- (nodes of 8) whose nodes are preempted with a per-hour probability of 0.01 to 0.15 and come back
-- after about half an hour. Job completion time of 1500 steps for Salamander (lazarus + mro, f = 2,
-- elastic recovery) against checkpoint-restart (classic expert parallelism, dense checkpoints every
-- 100 steps, 5-minute restarts) and fixed-ep-ft (whole expert-parallel groups of 16 nodes),
-- normalised to Salamander. A run that has not finished after 4 simulated days is cut off there (its
-- ratio is then a lower bound).
--   salamander sim scripts/experiments/lazarus_jct.lua
local restart = { restart_s = 300 }
return {
  trials = 4,
  cluster = { nodes = 32, gpus_per_node = 8, slots_per_gpu = 2 },
  failures = { law = "exponential", per_hour = 0.05, repair_s = 1800, repair_random = true },
  workload = {
    layers = 2, layer_weight = 29, experts = 256, top_k = 8,
    tokens_per_step = 4194304, samples_per_step = 1024,      -- 1024 sequences of 4096 tokens
    loads = { kind = "zipf", s = 0.8 },
  },
  step = {
    dense_s_per_token = 4e-4,          -- attention + dense layers, fwd + bwd, per token, one GPU
    expert_s_per_token = 1e-6,         -- one routed token through one expert, per layer
    alltoall_alpha_s = 1e-4, alltoall_s_per_byte = 2e-11, token_bytes = 14336,   -- d = 7168, bf16; 50 GB/s
    allreduce_alpha_s = 5e-3, allreduce_s_per_byte = 1e-11, dense_grad_bytes = 4e10,
    expert_state_bytes = 5.3e8,        -- 44 M parameters x 12 bytes (fp32 master + Adam)
    dense_state_bytes = 2.4e11,        -- 20 B non-expert parameters x 12 bytes
    p2p_Bps = 25e9, ckpt_write_Bps = 2e9, ckpt_read_Bps = 4e9,
  },
  costs = { detect_s = 0.3, plan_s = 0.1, rebuild_s = 5, join_batch_s = 120 },
  strategies = {
    { kind = "salamander", min_replicas = 2, checkpoint = { kind = "dense", every = 100 }, costs = restart },
    { kind = "checkpoint-restart", allocation = "uniform", placement = "spread",
      checkpoint = { kind = "dense", every = 100 }, costs = restart },
    { kind = "fixed-ep-ft", checkpoint = { kind = "dense", every = 100 }, costs = restart },
  },
  stop = { steps = 1500, horizon_s = 4 * 86400 },   -- a run cut off at 4 days shows as 4 days
  report = { recovery_probability = false },
  sweep = {
    { param = "cluster.nodes", values = { 32, 64, 128 } },
    { param = "failures.per_hour", values = { 0.01, 0.05, 0.10, 0.15 } },
  },
  table = { metric = "jct_s", normalise_to = "salamander" },
}

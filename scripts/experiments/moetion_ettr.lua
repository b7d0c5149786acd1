-- moetion_ettr.lua — MoEtion's comparison (Gandhi & Kozyrakis, §6): the effective training time
-- ratio of one job under failures with a mean time between failures of 10 minutes to 2 hours, for
-- four ways to checkpoint the same MoE (64 experts per layer, top-2, 32 layers simulated as 2 of
-- weight 16, 16 nodes x 8 GPUs, ~3 s iterations, ~1.2 TB of training state). Every failure restarts
-- from the checkpoint (the node is replaced from a spare pool):
--   dense    the whole state to remote storage every 100 iterations (blocking)
--   gemini   the whole state to host memory at the oracle interval for the true MTBF (Gemini-style)
--   moc      non-expert state + 25 % of the experts (round robin) to host memory every 10 iterations
--   moetion  sparse snapshots over W_sparse iterations from the real `moetion` checkpoint policy;
--            a failure replays the last window with frozen operators (at most 2 W iterations redone)
--   salamander sim scripts/experiments/moetion_ettr.lua
local function ckpt(label, checkpoint)
  return { kind = "checkpoint-restart", label = label, allocation = "uniform", placement = "spread", checkpoint = checkpoint }
end
return {
  trials = 4,
  cluster = { nodes = 16, gpus_per_node = 8, slots_per_gpu = 1 },
  failures = { law = "exponential", mtbf_s = 16 * 1800, spares = true },
  workload = { layers = 2, layer_weight = 16, experts = 64, top_k = 2, tokens_per_step = 2097152, samples_per_step = 512,
               loads = { kind = "zipf", s = 1.0 } },
  step = {
    dense_s_per_token = 1e-4, expert_s_per_token = 2e-6,
    alltoall_alpha_s = 1e-4, alltoall_s_per_byte = 2e-11, token_bytes = 8192,
    allreduce_alpha_s = 5e-3, allreduce_s_per_byte = 1e-11, dense_grad_bytes = 1e10,
    expert_state_bytes = 6e8, expert_weight_bytes = 1e8, dense_state_bytes = 5e10,   -- ~1.3 TB in all
    ckpt_write_Bps = 1e9, ckpt_read_Bps = 2e9, snapshot_Bps = 5e8,   -- per node to storage; per GPU to host, beside training traffic
  },
  costs = { restart_s = 30 },   -- relaunch + rendezvous; reading a checkpoint back is added per model
  strategies = {
    ckpt("dense", { kind = "dense", every = 100 }),
    ckpt("gemini", { kind = "oracle", in_memory = true }),
    ckpt("moc", { kind = "moc", fraction = 0.25, every = 10, in_memory = true }),
    ckpt("moetion", { kind = "moetion" }),
  },
  stop = { horizon_s = 12 * 3600 },
  report = { recovery_probability = false },
  -- the job's MTBF (10 min .. 2 h) is 16 nodes x this per-node mean
  sweep = { { param = "failures.mtbf_s", values = { 16 * 600, 16 * 1200, 16 * 1800, 16 * 3600, 16 * 7200 } } },
  table = { metric = "ettr" },
}

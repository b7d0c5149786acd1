-- spare_ttt.lua — SPARe's time-to-train study (Lee et al., §5): N data-parallel groups (each a whole
-- model on 128 GPUs; N = 200, 600, 1000, i.e. 25.6 k to 128 k GPUs) under Weibull failures with
-- shape k = 0.78 (each group's mean time between failures 16.5 days: Llama 3's 419 interruptions
-- in 54 days on 16 k GPUs), a one-hour restart after a wipe-out (failed groups are replaced then),
-- and checkpoints at the optimal period T_c* for each strategy's own mean time between restarts.
-- Time to train 10 000 steps of 10 s for SPARe (Golomb stacks, the reordering controller of the
-- `spare` redundancy policy) and traditional r-fold replication at redundancy r, against
-- checkpoint-only (no redundancy: every failure restarts).
--   salamander sim scripts/experiments/spare_ttt.lua
local ckpt = { kind = "oracle" }
return {
  trials = 4,
  cluster = { nodes = 200, gpus_per_node = 128 },
  failures = { law = "weibull", shape = 0.78, mtbf_s = 16.5 * 86400, spares = true },
  workload = { samples_per_step = 1 },
  step = { shard_s = 10, dense_state_bytes = 2e12, ckpt_write_Bps = 1e8, ckpt_read_Bps = 1e8 },
  costs = { restart_s = 3600, mask_s = 0.1 },
  strategies = {
    { kind = "spare", redundancy = 2, checkpoint = ckpt },
    { kind = "replication", redundancy = 2, checkpoint = ckpt },
    { kind = "checkpoint-only", checkpoint = ckpt },
  },
  stop = { steps = 10000, horizon_s = 60 * 86400 },
  report = { recovery_probability = false },
  sweep = {
    { param = "cluster.nodes", values = { 200, 600, 1000 } },
    { param = "strategies.*.redundancy", values = { 2, 3, 4, 6, 8, 10 } },
  },
  table = { metric = "jct_s" },
}

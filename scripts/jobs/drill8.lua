-- drill8.lua — the job the shipped drills run on: the quickstart model on a local mesh of 8 CPU
-- nodes (the drills' sizes follow Lazarus's evaluation, scaled to one machine). A batch of 64
-- sequences, so each worker's computing dominates its step as it does on GPUs: with 16 (the
-- quickstart's), 8 workers spend most of a step in collectives and per-step overheads and train
-- only ~1.2x what 4 do at fair cores, against ~1.9x with 64 (docs/performance.md, "The drill job
-- since 2026-11-29").
-- 16 experts on 4 slots a node: the baselines' expert-parallel groups span four nodes, as they span
-- many GPUs in Lazarus's evaluation (with 8 experts a group was two nodes, and fixed groups idled at
-- most one node: docs/performance.md, "The traces with groups of four").
-- Dense snapshots every 5 steps (about a second at 4-8 workers) are the last rung of the recovery
-- ladder, and checkpoint-restart's restore point.
return {
  name = "drill8",
  model = {
    layers = 2, d_model = 64, heads = 4,
    experts = 16, top_k = 2,
    seq_len = 64, vocab = 256,
  },
  data = { path = "/usr/share/games/fortunes", format = "bytes" },
  train = {
    steps = 100000,        -- drills decide when to stop (drill{steps} or their duration)
    batch = 64, lr = 1e-2, warmup = 30, seed = 1,
    rebalance_every = 50,
    checkpoint_every = 5,  -- dense snapshots (the fallback when an expert loses every replica)
    -- MoEtion's sparse snapshots may take a fifth of an iteration on these CPU workers, as its
    -- device-to-host copy costs a GPU's compute next to nothing; with the writer's copy alone sizing
    -- the window (0), a window of 1 took a third of the drills' throughput (docs/checkpoints.md).
    -- The windows a fifth allows here (2 and more) restore no newer state on average than the dense
    -- snapshots every 5 steps, so those plans take none (the sparse_snapshots event says so); a
    -- window of 1, where the measured path allows it, is taken
    snapshot_cpu_share = 0.2,
    recovery = "elastic",  -- or the baselines: "fixed-ep-ft", "checkpoint-restart"
    -- The first hundred steps send nearly every token of a step to two experts a layer (the model
    -- still predicts the bytes' frequencies alone); shadowing those experts lets every worker compute
    -- its own tokens of them (docs/performance.md, "Shadowed experts"). All three modes shadow alike
    shadow_experts = true,
  },
  mesh = { nodes = 8, devices = "cpu:1", heartbeat_ms = 100, miss_limit = 3 },
  policies = {
    allocation = "lazarus", placement = "goodput",
    min_replicas = 2, slots = 4,
  },
}

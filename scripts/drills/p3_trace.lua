-- p3_trace.lua — Lazarus §6.4: replay the AWS P3 spot-instance trace (Bamboo's, 11.4 hours,
-- 10-32 live nodes) on the local mesh, its live-node count scaled to max_nodes and its time to
-- time_scale. Run it for Salamander and both baselines in one command; compare.html compares the
-- samples each trained in the same time:
--   salamander run scripts/jobs/drill8.lua --drill scripts/drills/p3_trace.lua \
--       --modes elastic,fixed-ep-ft,checkpoint-restart --out runs/p3
-- The trace is not shipped: pass its path with --drill-arg trace=PATH (the default is where the
-- project's shared data lives next to a checkout); any other trace in a format docs/drills.md
-- names replays the same way (e.g. --drill-arg trace=fleet.csv,time_unit=h,time_scale=0.001).
-- The drill lasts as long as the trace, scaled; fit_s=T scales any trace to last T seconds (instead
-- of time_scale); duration_s=T stops the drill then instead (a trace of a single instant, a fleet
-- that never changed, needs one).
replay_trace{
  file = args.trace or "../../../shared/data/bamboo-spot-traces/traces/p3-trace.csv",
  format = args.format or "auto",    -- bamboo, counts (the GCP traces) or series, told apart (docs/drills.md)
  time_unit = args.time_unit or "s",  -- a series trace's numeric times: s, ms, min or h
  time_scale = tonumber(args.time_scale or (not args.fit_s and "0.002" or nil)),  -- 11.4 h of trace in 82 s
  fit_s = tonumber(args.fit_s),
  max_nodes = tonumber(args.max_nodes or "8"),
}
drill{ name = "p3-trace", seed = 1, duration_s = tonumber(args.duration_s) }

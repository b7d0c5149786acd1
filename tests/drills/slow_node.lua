-- slow_node.lua — t0150's gray failure: node 2's workers keep 40 % of their CPU share for a while
-- (a run with --cpu-share), then get it back. The speed watch must name node 2's worker slow soon
-- after the slowdown, give it back soon after it ends, and name no other worker.
drill{ name = "slow-node", steps = tonumber(args.steps or "240"), seed = 3 }
slow{ node = 2, step = 20, factor = 0.4, for_s = tonumber(args.for_s or "4") }
expect{ lost_steps = 0 }

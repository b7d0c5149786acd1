-- kill_controller.lua — the controller dies: SIGKILLed in the middle of training (twice, and
-- once in the same step as a node), and restarted from its journal after a delay. The agents ride
-- out its absence, the resumed controller goes on from the last committed step, and no committed
-- step is lost.
--   salamander run --drill scripts/drills/kill_controller.lua [--drill-arg every=15,restart_s=1]
-- `salamander run` hosts its controller as a child process for this drill (it cannot SIGKILL
-- itself and go on); the restarts need mesh.controller_grace_ms above restart_s (30 s by default).
local every = tonumber(args.every or "15")
local restart = tonumber(args.restart_s or "1")
drill{ name = "kill-controller", steps = every * 4, seed = 1 }
kill{ controller = true, step = every, restart_after_s = restart }
kill{ controller = true, step = every * 2, restart_after_s = restart }
kill{ node = "random", step = every * 3 }
expect{ lost_steps = 0, restores = 0 }

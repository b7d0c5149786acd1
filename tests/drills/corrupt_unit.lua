-- corrupt_unit.lua — t1001's drill: a fault injector flips `bits` bits of one node's copy of a unit
-- as step `at` begins (the job must allow it: faults = { inject = true }). The holders' digests
-- disagree at that step: it is aborted before it commits, the odd copy is repaired from the
-- majority's, the step runs again — no committed step lost, nothing restored.
drill{ name = "corrupt-unit", steps = tonumber(args.steps or "30") }
corrupt{ node = tonumber(args.node or "1"), unit = args.unit or "layer0.expert0", bits = tonumber(args.bits or "3"),
         step = tonumber(args.at or "10") }
-- (restores=1: a unit with two holders has no majority, and the sparse window restores the model)
expect{ lost_steps = tonumber(args.lost or "0"), restores = tonumber(args.restores or "0") }

-- report_render.lua — t0320's drill: a short run with one node killed part way, so that its
-- report has a failure, a recovery, a drill action and a stop to draw.
drill{ name = "report-render", steps = 60, seed = 2 }
kill{ node = 2, step = 25 }
expect{ lost_steps = 0, restores = 0, resume_s = 10 }

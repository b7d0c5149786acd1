-- goodput.lua — expected goodput of a placement: the share of a balanced, failure-free run's work
-- that a plan of this balance and recovery probability gets done (`local goodput = require "goodput"`).
-- The default placement, `goodput`, picks the frontier point that maximises it.
--
-- Imbalance: a step waits for each MoE layer's busiest node, so the expert part of the step takes
-- `balance` times as long as it would evenly; the rest of the step does not change:
--     speed = 1 / ((1 - EXPERT_SHARE) + EXPERT_SHARE * balance)
-- Failures: nodes fail at `rate` per node and hour, so the N nodes lose one at N * rate an hour.
-- Before the re-plan that follows a loss, a second node goes down too with probability
--     q = correlated + (N - 1) * rate * window_s / 3600
-- (a failure that takes another with it, or one that falls in the window), a third with q again.
-- A loss of k nodes wipes out some expert with probability 1 - P(k) (P(3) stands for three or more),
-- and a wipe-out costs restore_s: what its restore (from peers' snapshots or from disk) takes beyond
-- the elastic recovery the same loss would cost, and the steps run again. The share of time lost to
-- wipe-outs is
--     lost = N * rate / 3600 * restore_s * ((1 - q)(1 - P(1)) + q (1 - q)(1 - P(2)) + q^2 (1 - P(3)))
-- and goodput = speed * (1 - lost). An elastic recovery (no expert lost) costs the same whatever the
-- placement, so it is left out of the comparison.
local goodput = {}

-- The share of a step that is expert work (the MoE layers' expert GEMMs and their token exchange)
-- when it is even. Not measured by the engine; in the models here it is between a third
-- (bench_skew: 2.5x imbalance cost 1.5x in tokens/s) and most of the step; a half is the middle.
goodput.EXPERT_SHARE = 0.5

-- The probability that a loss is not alone, from ctx.failures.
function goodput.together(failures, nodes)
  local q = failures.correlated + (nodes - 1) * failures.rate * failures.window_s / 3600
  return math.min(q, 1)
end

-- Scores a frontier point ({balance, p = {P(1), P(2), P(3)}}) for a plan of `nodes` nodes.
-- Returns {goodput, speed, lost, wipeouts_per_hour}.
function goodput.score(point, failures, nodes)
  local share = goodput.EXPERT_SHARE
  local speed = 1 / ((1 - share) + share * point.balance)
  local q = goodput.together(failures, nodes)
  local p1, p2, p3 = point.p[1] or 1, point.p[2] or point.p[1] or 1, point.p[3] or point.p[2] or point.p[1] or 1
  local wipe = (1 - q) * (1 - p1) + q * (1 - q) * (1 - p2) + q * q * (1 - p3)
  local wipeouts_per_hour = nodes * failures.rate * wipe
  local lost = math.min(1, wipeouts_per_hour * failures.restore_s / 3600)
  return { goodput = speed * (1 - lost), speed = speed, lost = lost, wipeouts_per_hour = wipeouts_per_hour }
end

-- Goodput closer to the best than this is a tie: the model's inputs (EXPERT_SHARE, the restore
-- cost, often the failure rate) are assumptions, and a difference this small is no reason to give
-- up survival. (On the SmartMoE trace, 16 x 8, iteration 151, balance first had mean balance
-- 1.0307 against blocks of one expert's 1.0312, at P(2) 0.24 against 0.93.)
goodput.TIE = 0.002

-- True when a survives better than b: higher P(k) at the first k where they differ (fewest failures
-- matter most); the same everywhere: the better balance.
function goodput.survives_better(a, b)
  for k = 1, #a.p do
    if a.p[k] ~= b.p[k] then return a.p[k] > b.p[k] end
  end
  return a.balance < b.balance
end

-- The point of `points` (frontier points, as sal.frontier returns them) with the highest expected
-- goodput, the most survivable of those within TIE of it. Returns the point and its score.
function goodput.best(points, failures, nodes)
  local top = 0
  for _, p in ipairs(points) do top = math.max(top, goodput.score(p, failures, nodes).goodput) end
  local best, best_score
  for _, p in ipairs(points) do
    local s = goodput.score(p, failures, nodes)
    if s.goodput >= top * (1 - goodput.TIE) and (not best or goodput.survives_better(p, best)) then
      best, best_score = p, s
    end
  end
  return best, best_score
end

local function pct(x)
  if x >= 0.01 then return string.format("%.1f %%", 100 * x) end
  return string.format("%.2g %%", 100 * x)
end

local function figures(p)
  local out = string.format("balance %.3f", p.balance)
  for k, v in ipairs(p.p) do out = out .. string.format(", P(%d) %.4f", k, v) end
  return out
end

local function signed_pct(x)
  if math.abs(x) >= 0.0001 then return string.format("%+.2f %%", 100 * x) end
  return string.format("%+.2g %%", 100 * x)
end

-- One paragraph: what was chosen, what it costs, and the alternative turned down and why.
function goodput.explain(chosen, score, other, other_score, failures, nodes)
  local text = string.format("%s (%s): expected goodput %.4f of an even, failure-free plan; imbalance costs %s, "
      .. "wipe-outs %s of the time (%s; a wipe-out costs %.3g s: %s)", chosen.name, figures(chosen), score.goodput,
      pct(1 - score.speed), pct(score.lost), failures.source, failures.restore_s, failures.restore_source)
  if other then
    text = text .. string.format(". Turned down %s (%s): goodput %.4f; its balance would change the speed by %s and "
        .. "its recovery the time lost to wipe-outs by %s", other.name, figures(other), other_score.goodput,
        signed_pct(other_score.speed / score.speed - 1), signed_pct(other_score.lost - score.lost))
  end
  return text .. string.format(" (N = %d, P(a loss is not alone) = %.2g)", nodes, goodput.together(failures, nodes))
end

return goodput

-- lighten.lua — the default health policy. A worker the speed watch names slow gets less of each
-- step's work — fewer of the batch's sequences, fewer of its experts' tokens — so that it computes
-- about as long as the others instead of holding every step back: its share is divided by its lag
-- (its computing time over the others' in the same steps, measured since its share last changed),
-- damped: time is not proportional to work on a shared machine — a worker whose CPU quota was cut
-- runs unthrottled once its work fits the quota, so a small change of share can swing its lag from
-- 1.5 to 0.4. While its share is below even, each look steers it: a lag within [0.8, 1.1] is kept
-- up with and the share stays; above, the share shrinks by lag^0.7; below, it grows by lag^-0.5
-- while the watch still names it slow, by 1/lag once it does not — but by at most 1.5 a look while
-- its work still costs it more than 1.1 times the others' (its ratio): a worker that keeps up only
-- because its small share fits under its cut quota is not back, and an even share would throw it
-- over the cliff again (seen: share 0.39 at ratio 1.17, lag 0.25 -> even -> 2.4x slow). A worker
-- whose speed came back (ratio near 1) is at an even share at the next look, and so is one no
-- longer named slow whose share is already 0.8 of even and whose ratio is 1.25 or less (the ratio
-- is a median of 20 steps: it comes down slowly after the speed returns).
-- A worker that stays very slow for long — `drain_ratio` times the others' time for the same work,
-- `drain_after` steps after it was named — leaves the job (its node is drained and the job re-plans
-- without it), as long as enough workers remain; so does one whose copies were found corrupt
-- (flipped bits, caught by the digests and repaired) `drain_corrupt` times.
local drain_ratio = 4     -- a quarter of the others' speed or worse ...
local drain_after = 500   -- ... for this many steps since it was named slow: drained
local drain_corrupt = 2   -- copies found corrupt this often: the node's memory or CPU is not trusted
local least_share = 0.1   -- no worker gets less than a tenth of an even share
local even_above = 0.95   -- a share this close to even is made even
local keeps_up = { 0.8, 1.1 }  -- a lag in this band: the share stays
local down, up = 0.7, 0.5     -- a lag of 2 takes a share down by 2^0.7 = 1.62; one of 0.25 up by 2 (still slow)
local at_speed = 1.1          -- a ratio at or below this: its work costs it what it costs the others
local most_up = 1.5           -- otherwise a share grows by at most this much a look
local nearly = { share = 0.8, ratio = 1.25 }  -- a share this high at a ratio this low, not slow: even

-- Workers that would remain if the nodes of `drain` (and of worker i) left.
local function left_without(ctx, drain, i)
  local gone = { [ctx.workers[i].node] = true }
  for _, d in ipairs(drain) do gone[ctx.workers[d].node] = true end
  local n = 0
  for _, w in ipairs(ctx.workers) do if not gone[w.node] then n = n + 1 end end
  return n
end

-- The share that makes worker w compute as long as the others.
local function steered(w)
  local lag = w.lag > 0 and w.lag or w.ratio
  if lag >= keeps_up[1] and lag <= keeps_up[2] then return w.share end
  local gain = lag > 1 and down or (w.slow and up or 1)
  local factor = lag ^ -gain
  if factor > 1 and (w.ratio or 1) > at_speed then factor = math.min(factor, most_up) end
  local share = math.max(least_share, math.min(1, w.share * factor))
  local near = share >= nearly.share and (w.ratio or 1) <= nearly.ratio
  if (share >= even_above or near) and not w.slow then share = 1 end
  return share
end

local function decide(ctx)
  local shares, drain, why = {}, {}, {}
  for i, w in ipairs(ctx.workers) do
    shares[i] = (w.slow or w.share < 1) and steered(w) or 1
    local long = w.slow and ctx.step - w.since_step >= drain_after
    local untrusted = (w.corrupt or 0) >= drain_corrupt
    if (untrusted or (long and w.ratio >= drain_ratio)) and left_without(ctx, drain, i) >= ctx.min_workers then
      drain[#drain + 1] = i
      why[#why + 1] = untrusted and string.format("%s: %d copies found corrupt: drained", w.name, w.corrupt)
                      or string.format("%s at %.2fx for %d steps: drained", w.name, w.ratio, ctx.step - w.since_step)
    elseif shares[i] < 1 or w.share < 1 then
      why[#why + 1] = string.format("%s at %.2fx, lag %.2f: share %.2f", w.name, w.ratio, w.lag, shares[i])
    end
  end
  local note = #why > 0 and table.concat(why, "; ") or "every worker at speed: even shares"
  return { shares = shares, drain = drain, note = note }
end

local function selftest(t)
  local function worker(node, ratio, lag, slow, share, since)
    return { name = node .. ".0", node = node, ratio = ratio, lag = lag, slow = slow, since_step = since or 0,
             share = share or 1 }
  end
  -- named slow at twice the others' time: 2^-0.7 of a share
  local ctx = { step = 100, min_workers = 2,
                workers = { worker(1, 1, 1), worker(2, 2, 2, true, 1, 90), worker(3, 1.1, 1.1) } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.near(p.shares[2], 2 ^ -0.7, 1e-9)
  t.eq({ p.shares[1], p.shares[3] }, { 1, 1 })
  t.eq(p.drain, {})
  -- at half a share it keeps up: left there; it computes a fifth of the others' time: even again
  ctx.workers[2] = worker(2, 1.1, 1.0, false, 0.5)
  t.eq(decide(ctx).shares[2], 0.5)
  ctx.workers[2] = worker(2, 1, 0.2, false, 0.5)
  t.eq(decide(ctx).shares[2], 1)
  ctx.workers[2] = worker(2, 1, 0.6, true, 0.5)
  t.near(decide(ctx).shares[2], 0.5 / 0.6 ^ 0.5, 1e-9)  -- still named slow: carefully
  ctx.workers[2] = worker(2, 1, 0.6, false, 0.5)
  t.eq(decide(ctx).shares[2], 1)                        -- its speed is back (0.83 of even at 1x): even at once
  ctx.workers[2] = worker(2, 1, 0.7, false, 0.5)
  t.near(decide(ctx).shares[2], 0.5 / 0.7, 1e-9)        -- not slow, ratio 1, below 0.8 of even: by 1/lag
  ctx.workers[2] = worker(2, 1.17, 0.25, false, 0.39)
  t.near(decide(ctx).shares[2], 0.39 * 1.5, 1e-9)       -- keeps up under its cut quota: carefully
  ctx.workers[2] = worker(2, 1.23, 0.64, false, 0.58)
  t.eq(decide(ctx).shares[2], 1)                        -- 0.87 of even at 1.23x, not slow: even
  ctx.workers[2] = worker(2, 1.4, 0.64, false, 0.58)
  t.near(decide(ctx).shares[2], 0.58 * 1.5, 1e-9)       -- at 1.4x: not yet
  -- very slow for long: drained, unless that leaves too few workers
  ctx.step, ctx.workers[2] = 700, worker(2, 5, 1.2, true, 0.2, 90)
  p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.drain, { 2 })
  ctx.min_workers = 3
  t.eq(decide(ctx).drain, {})
  t.near(decide(ctx).shares[2], 0.2 / 1.2 ^ 0.7, 1e-9)
  -- corrupt copies: once is repaired and forgiven, twice drains the node
  ctx.min_workers = 2
  ctx.workers[2] = worker(2, 1, 1, false, 1)
  ctx.workers[2].corrupt = 1
  t.eq(decide(ctx).drain, {})
  ctx.workers[2].corrupt = 2
  p = decide(ctx)
  t.eq(p.drain, { 2 })
  t.ok(p.note:find("2 copies found corrupt") ~= nil, p.note)
end

return {
  api = 1, kind = "health", name = "lighten",
  doc = "a slow worker gets less work until it keeps up; drained if very slow for long",
  decide = decide, selftest = selftest,
}

-- mro.lua — maximum rank overlap (Lazarus §4.1), repaired where the paper's construction falls
-- short: the placement that survives random node failures best, whatever it costs in balance (its
-- work is evened out only by moves that keep every minimal node set). The layout itself is in
-- policies/lib/mro_layout.lua (the default placement, `goodput`, weighs it too); docs/placement.md
-- says what it computes and why nothing beats it.
local mro_layout = require "mro_layout"

local function decide(ctx)
  return { placement = mro_layout.place(ctx) }
end

local function selftest(t)
  -- the blocks fit: {1,2} on nodes 1-2, {3,4} on nodes 3-4; only those two pairs of failures lose an expert
  local ctx = { nodes = 4, slots = 2, experts = 4, layers = 1, floor = 2, replicas = { { 2, 2, 2, 2 } } }
  local p = decide(ctx)
  t.valid(p, ctx)
  t.eq(p.placement[1], { { 1, 2 }, { 1, 2 }, { 3, 4 }, { 3, 4 } })
  t.ok(math.abs(sal.recovery(p.placement, 2).p - 4 / 6) < 1e-12, "P(2) = 1 - 2/C(4,2)")
  -- cut short: 4 experts x 3 replicas on 4 nodes x 3 slots. The paper's blocks leave the fourth expert
  -- on one node; the repair finds the four distinct 3-node sets, which survive any 2 failures.
  local cut = { nodes = 4, slots = 3, experts = 4, layers = 1, floor = 2, replicas = { { 3, 3, 3, 3 } } }
  local q = decide(cut)
  t.valid(q, cut)
  t.eq(sal.recovery(q.placement, 2).p, 1, "no two failures lose an expert")
end

return {
  api = 1, kind = "placement", name = "mro",
  doc = "maximum rank overlap: least replicated first in blocks of c; exact search repairs a cut-short tail; "
        .. "then the work evened out by moves that keep every minimal node set (same recovery, balanced)",
  decide = decide, selftest = selftest,
}

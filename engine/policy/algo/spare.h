// spare.h — SPARe (Lee et al., "Stacked Parallelism with Adaptive Reordering for Fault-Tolerant LLM
// Pretraining Systems with 100k+ GPUs"): the closed forms used to size redundancy and checkpoints,
// the reordering controller run after every failure, and a Monte-Carlo check of the forms.
//
// Setting: N data-parallel groups each hold a full model and a stack of r data shards (golomb.h);
// there are N shard types. A step computes rounds 0..S−1 of every surviving group's stack and
// all-reduces as soon as every shard type was computed once; S is the all-reduce depth. After k
// failures the N − k survivors must still cover all N types; a "wipe-out" is the first failure that
// leaves some shard type with no surviving host (then the job restarts from a checkpoint).
//
// Where a definition below is ours rather than the paper's, its comment says so; docs/algorithms.md
// lists those choices.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "policy/algo/golomb.h"

namespace sal::algo {

// ---- Closed forms ---------------------------------------------------------------------------

// μ(N, r) ≈ Γ(1/r)/r · N^(1 − 1/r): mean number of failures endured (masked) before the first
// wipe-out when groups fail in uniformly random order. The paper's closed form: a shard type is
// lost after k failures with probability ≈ (k/N)^r, so P(no wipe-out after k) ≈ exp(−N (k/N)^r)
// and μ = ∫ exp(−N^(1−r) k^r) dk. An approximation for r ≥ 2 and large N (tested against
// simulate_spare within a few percent for N = 200…1000). Errors unless 1 ≤ r ≤ N.
Result<double> mean_failures_endured(int groups, int redundancy);

// c(k) = ⌈N / (N − k)⌉: the fewest rounds in which N − k survivors can compute N shard types — the
// lower bound on the all-reduce depth after k failures. Errors unless 0 ≤ k < N.
Result<int> min_depth_bound(int groups, int failures);

// S̄(N, r) ≈ (1/⌊μ⌋) Σ_{k=0}^{⌊μ⌋−1} (c(k) + ρ_k): the mean compute overhead (rounds per step, in
// units of one shard) over the failures a layout endures. The paper names ρ_k without a definition
// we could read; ours: ρ_k = E[minimal depth after k failures] − c(k) ≥ 0, the rounds the layout's
// constraints add above the counting bound (estimate it with simulate_spare's depth_by_failures).
// `depth_gap` gives ρ_0, ρ_1, …; missing entries count as 0, which yields the lower bound.
Result<double> mean_overhead(int groups, int redundancy, const std::vector<double>& depth_gap = {});

// r* ≈ ⌊log₂ N + 0.833⌋: the redundancy minimising time-to-train, from μ(N, r*) ≈ N/2 and
// Γ(1 + 1/r) ≈ 1 − γ/r (0.833 ≈ γ / ln 2, γ Euler's constant). Errors for N < 1.
Result<int> optimal_redundancy(int groups);

// Checkpoint timing, all in the same time unit. save = T_s (time to write a checkpoint),
// mtbf = T_f (mean time between the failures that force a restart), restart = T_r.
//
// A(T_c) = (1 − T_s/T_c) · T_f / (T_f + T_r + T_c/2): availability (useful fraction of wall time)
// with a checkpoint every T_c (save time included). Each restart costs T_r plus on average half a
// period of lost work; the rest of the time loses T_s out of every T_c to saving. The paper takes
// A* from Saxena et al. ("Optimal Checkpoint Interval with Availability as an Objective Function")
// without restating the model; this is our reconstruction, chosen because its maximiser is exactly
// the paper's T_c* below. Errors unless period > save ≥ 0, mtbf > 0, restart ≥ 0.
Result<double> availability(double period, double save, double mtbf, double restart);

// T_c* = T_s + √(T_s² + 2 T_s (T_f + T_r)): the period maximising A (Young/Daly-style).
Result<double> optimal_checkpoint_period(double save, double mtbf, double restart);

// A* = A(T_c*).
Result<double> optimal_availability(double save, double mtbf, double restart);

// J(r) = S̄(N, r) / A*(μ(N, r) · m): normalised time-to-train with SPARe + checkpoints, where m is
// the mean time between group failures, so wipe-outs come every μ·m on average. Minimising J over r
// is what r* approximates.
Result<double> time_to_train_factor(int groups, int redundancy, double failure_interval,
                                    double save, double restart,
                                    const std::vector<double>& depth_gap = {});

// ---- Reordering controller ------------------------------------------------------------------

struct ShardStacks {
  int shard_types = 0;                    // N
  std::vector<std::vector<int>> stacks;   // per group: its shard types, position = round
  std::vector<bool> alive;                // per group
};

// The stacks of a fresh layout (golomb.h's hosted lists), every group alive.
ShardStacks initial_stacks(const ShardLayout& layout);

enum class ReorderOutcome {
  // HK-fixed: the current stacks cover every type within the minimal depth; nothing moves.
  kept,
  // HK-free found the minimal depth; min-cost flow chose the fewest promotions.
  reordered,
  // Some shard type has no surviving host.
  wiped_out,
};

struct ReorderResult {
  ReorderOutcome outcome = ReorderOutcome::kept;
  int depth = 0;                          // minimal all-reduce depth (0 on wipe-out)
  std::vector<std::vector<int>> stacks;   // new stacks (dead groups' stacks as given)
  std::vector<int> provider;              // per shard type: a surviving group computing it in
                                          // rounds 0..depth−1 (−1 on wipe-out)
  int moves = 0;                          // shard types promoted into some group's first `depth`
                                          // rounds (each swaps two entries of that group's stack)
  int feasibility_checks = 0;             // Hopcroft–Karp runs
  std::vector<int> lost;                  // shard types with no surviving host (wipe-out)
};

// After failures (state.alive), the smallest depth d at which the survivors can compute every shard
// type — each group computing d of its own shard types — and stacks achieving it:
//  1. HK-fixed: if the current stacks' first c(k) rounds already cover every type, keep them;
//  2. HK-free: the smallest d ≥ c(k) for which a matching of shard types to (group, round < d)
//     slots of their hosts saturates every type (Hopcroft–Karp);
//  3. min-cost max-flow at that d: the assignment with the fewest shard types promoted from a
//     group's later rounds into its first d, starting from the current stacks.
// If the current stacks cover every type within d there are no moves (outcome kept). The depth is
// always the minimum, even when that means reordering stacks that would cover at a larger depth.
// Errors on malformed input (sizes, ids out of range, a type twice in one stack, no group alive).
Result<ReorderResult> reorder(const ShardStacks& state);

// True when the survivors can compute every shard type within `depth` rounds (Hopcroft–Karp).
Result<bool> depth_feasible(const ShardStacks& state, int depth);

// ---- Simulation ---------------------------------------------------------------------------

// The minimal all-reduce depth of SPARe's layout as groups fail one at a time, kept incrementally
// (what depth_feasible answers from scratch). It holds an assignment of every shard type to one
// surviving host group, each group taking at most depth() types — reordering lets a group compute
// any of its types in its first rounds, so that is exactly feasibility at depth(). A failure frees
// the types its group carried; each is placed again along an augmenting path (a breadth-first
// search over the groups: the type moves into a host, whose type moves into another host, …, until
// a group with room). When a type has no augmenting path the assignment is a maximum one (Berge), so
// no assignment at this depth covers every type: the depth goes up by one — every survivor gets a
// round more — and the type is placed. Depths never go down as groups fail, so each failure costs a
// few short searches instead of a Hopcroft–Karp run over all N types per depth tried.
class SpareDepthTracker {
 public:
  explicit SpareDepthTracker(const ShardLayout& layout);
  int depth() const { return depth_; }
  // Marks group g dead and restores a minimal-depth assignment. Returns false (and changes nothing
  // more) when some type it carried has no surviving host: a wipe-out. g must be alive.
  bool fail_group(int g);

 private:
  bool place(int type);  // along an augmenting path at the current depth
  void assign(int type, int group);
  void unassign(int type);

  int depth_ = 1;
  std::vector<std::vector<int>> hosts_;    // type -> its host groups
  std::vector<char> alive_;                // group
  std::vector<int> owner_;                 // type -> the group computing it (-1: none)
  std::vector<std::vector<int>> carried_;  // group -> the types it computes
  std::vector<int> slot_;                  // type -> its index in carried_[owner]
  // search scratch, reused: visit stamps and the type each reached group would take in
  std::vector<int> group_seen_, type_seen_, enters_;
  int stamp_ = 0;
};

struct SpareSimOptions {
  int trials = 1000;
  uint64_t seed = 1;
  bool measure_depth = false;  // also compute the minimal depth after every masked failure (slower)
};

struct SpareSimResult {
  int trials = 0;
  double mean_endured = 0;               // failures endured before the first wipe-out
  double stderr_endured = 0;             // its standard error
  double mean_depth = 0;                 // minimal depth averaged over every masked state
                                         // (k = 0..endured of every trial); measure_depth only
  std::vector<double> depth_by_failures; // mean minimal depth after k failures, over the trials
                                         // that endured k; measure_depth only
};

// Fails the groups of SPARe's layout one at a time in uniformly random order until the first
// wipe-out, `trials` times. Deterministic for a seed.
Result<SpareSimResult> simulate_spare(int groups, int redundancy,
                                      const SpareSimOptions& options = {});

}  // namespace sal::algo

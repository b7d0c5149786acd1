// shadows.h — shadowed experts (FasterMoE's dynamic shadowing, Zhai et al., PPoPP '22) for the
// flexible dispatcher: when one step's tokens crowd onto a few experts, the workers holding them
// compute for everyone while the others wait in the all-to-all. The replica table cannot follow a
// single step (it is planned from the loads of many), so a shadowed expert's weights go, for this
// step only, to every worker with tokens for it, each computes its own tokens, and the weight
// gradients come back to one holder (the expert's source, its lowest-ranked holder), which adds them
// into its own before the holders' gradient sync. No optimizer state moves and no plan changes.
//
// Which experts: every rank decides alike from the layer's schedule (the all-gathered counts and
// the quotas). The candidates are the experts some rank computes tokens of other ranks for, most
// such rows first; the shadowed ones are the shortest prefix of that order that leaves the busiest
// rank least busy (its quotas summed over the experts, over its dispatch weight), and none unless
// that lowers the busiest rank's rows by at least `min_gain` and 5 %. A prefix, not one expert at
// a time: when two experts take a step's tokens, shadowing either alone gives its holder's tokens of
// the other back to it and makes no rank less busy. A rank of weight 0 (the health policy's) cannot
// compute its own tokens, so an expert any such rank has tokens for is never shadowed.
//
// The same sums in another order: a shadowed expert's gradient is its holders' rows and the other
// ranks' partial gradients added one after another, where an unshadowed one is a single product over
// all its rows. Shadowing is therefore the job's choice (train.shadow_experts), and a run that
// shadows is not bit for bit a run that does not.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/dispatch.h"

namespace sal::runtime {

struct ShadowPlan {
  std::vector<int> source;  // per expert: the rank that sends its weights (-1: not shadowed)

  bool shadowed(int e) const { return source[size_t(e)] >= 0; }
  bool any() const;
};

// The experts to shadow in a layer whose schedule is `s` (with the counts it was made from),
// `units` its replica table R[e][rank] and `weights` the dispatch weights (empty: even).
ShadowPlan choose_shadows(const DispatchSchedule& s, const Counts& units, const std::vector<uint32_t>& weights,
                          int64_t min_gain);

// `s` with each shadowed expert's tokens computed where they are (send[e][j][j] = quota[e][j] =
// tokens[e][j]).
void keep_shadowed_local(DispatchSchedule& s, const ShadowPlan& p);

// Whether `rank` computes expert e as a shadow (it holds no replica of it but has tokens for it).
bool computes_shadow(const DispatchSchedule& s, const Counts& units, const ShadowPlan& p, int e, int rank);

}  // namespace sal::runtime

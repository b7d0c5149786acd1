// step_balance.h — how evenly a placement spreads the steps' own expert work, step by step.
//
// A placement is usually judged on the window's mean loads (placement_balance.h), but the
// dispatcher splits each step's own counts over the replicas (core/expert_split.h), and each step
// waits for that step's busiest node. Routing moves from step to step: the mean of a window can be
// even while every step puts its excess on a few experts. A layout whose replicas pair the nodes in
// closed blocks (every expert of a block held by the same nodes) cannot move a step's excess out of
// its block; one whose experts' holders overlap little can. This scores a layer's placement on the
// recorded steps themselves: per step, each expert's tokens split over its holders as the dispatcher
// splits them (by counts, or evenly), the busiest node's tokens over the mean; the mean over the
// steps.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "policy/algo/recovery.h"

namespace sal::algo {

// steps[s][e]: expert e's tokens in step s (the layer's counts). 1 when there are no steps or no
// tokens. Experts outside the placement's ids are left out.
double step_imbalance(const LayerPlacement& layer, const std::vector<std::vector<uint32_t>>& steps, bool by_counts);

// Steps as the load window keeps them, [step][layer][expert], as the frontier takes them,
// [layer][step][expert]. Errors when a step has another number of layers than `layers`.
using StepsByLayer = std::vector<std::vector<std::vector<uint32_t>>>;
Result<StepsByLayer> steps_by_layer(const std::vector<std::vector<std::vector<uint32_t>>>& steps, size_t layers);

}  // namespace sal::algo

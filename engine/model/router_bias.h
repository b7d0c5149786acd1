// router_bias.h — DeepSeek-V3's auxiliary-loss-free load balancing (moe-llama, model.bias_update).
// Each gate holds a bias per expert (GateLayout::bias) that is added to the router's scores to
// choose a token's k experts only: the chosen experts' outputs are weighed by the scores without
// it, and it gets no gradient (AdamW leaves it as it is: its gradient and moments stay 0). After
// each update it moves by one rule from the step's loads over the whole global batch: up by
// model.bias_update for an expert under the mean load, down for one over it, unchanged at the mean.
// Every rank sees the same loads and holds every gate, so the bias stays the same everywhere; it
// lives in the gate's weights, so snapshots, moves, frozen replay, restores and export carry it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "model/params.h"

namespace sal::model {

// Per layer, each expert's share of the step's assignments over the global batch (summing to 1
// over the experts). A pass over part of the batch adds its shares weighted by its part.
using RouterLoad = std::vector<std::vector<double>>;

// Zero loads in the shape the model's routing bias takes (layers x experts; empty without one).
RouterLoad zero_load(const Dims& d);

// `into` += `from`, element by element (growing `into` to `from`'s shape).
void add_router_load(RouterLoad& into, const RouterLoad& from);

// The top k of scores + bias for each of N rows of E: the experts chosen (idx [N*k], best first)
// and their scores without the bias (chosen [N*k]). bias null: the top k of the scores.
void biased_topk(const float* scores, const float* bias, int N, int E, int K, int32_t* idx, float* chosen);

// The balancing step on the bias of every gate held that is not frozen (a frozen gate is given
// its next weights by the replay), from the loads of the step just updated. Nothing without
// router_bias; loads of another shape fail.
Status update_router_bias(Params& p, const RouterLoad& load);

// Every layer's loads in one row (for a collective) and back, in the shape of `like`.
std::vector<double> flatten_load(const RouterLoad& load);
RouterLoad unflatten_load(const std::vector<double>& flat, const RouterLoad& like);

}  // namespace sal::model

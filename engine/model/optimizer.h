// optimizer.h — AdamW with fp32 master weights, a linear warmup then cosine decay of the learning
// rate, and global-norm gradient clipping. Weight decay applies to the weight matrices (attention,
// gate, experts, token embedding), not to biases, LayerNorm parameters or position embeddings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/params.h"

namespace sal::model {

struct OptimConfig {
  double lr = 3e-3;
  int64_t warmup = 20;
  int64_t total_steps = 200;    // the cosine reaches min_lr here (0: no decay)
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double clip = 1.0;            // max global gradient norm (0: no clipping)
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
};

// Learning rate of step `step` (0-based).
double learning_rate(const OptimConfig& c, int64_t step);

// Factor the gradients are multiplied by so that their global norm is at most c.clip.
double clip_scale(const OptimConfig& c, double global_norm);

// One AdamW update of every unit held but the frozen ones, with gradients scaled by `grad_scale`;
// t is the 1-based update count (bias correction).
void apply_adamw(Params& p, const OptimConfig& c, double lr, double grad_scale, int64_t t);
// The same for one unit (frozen or not): its gradient scaled, then its AdamW step.
void adamw_unit(const Dims& d, Unit& u, const OptimConfig& c, double lr, double grad_scale, int64_t t);

// A unit's floats in runs of equal weight decay, in order: [begin, end) and whether the run decays.
// The CPU and GPU optimizers update each run with one AdamW call.
struct DecayRun {
  size_t begin, end;
  bool decay;
};
std::vector<DecayRun> decay_runs(const Dims& d, UnitKind kind, size_t n);

// Sum of squared gradients of one unit (the runtime adds them up over distinct units).
double grad_sum_squares(const Unit& u);

}  // namespace sal::model

// optimizer.cpp — see optimizer.h.
#include "model/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"

namespace sal::model {

namespace k = sal::kernels::cpu;

namespace {

constexpr double kPi = 3.14159265358979323846;

// The slices of a unit that get weight decay.
std::vector<Slice> decayed(const Dims& d, UnitKind kind) {
  switch (kind) {
    case UnitKind::embedding: return {embedding_layout(d).tok, embedding_layout(d).head};
    case UnitKind::dense: {
      auto l = dense_layout(d);
      return {l.w_qkv, l.w_o, l.sh_w13, l.sh_w2, l.sh_gate};
    }
    case UnitKind::gate: return {gate_layout(d).w};
    case UnitKind::expert: return {expert_layout(d).w1, expert_layout(d).w2};
  }
  return {};
}

}  // namespace

double learning_rate(const OptimConfig& c, int64_t step) {
  if (c.warmup > 0 && step < c.warmup) return c.lr * double(step + 1) / double(c.warmup);
  if (c.total_steps <= c.warmup) return c.lr;
  double progress = std::min(1.0, double(step - c.warmup) / double(c.total_steps - c.warmup));
  double min_lr = c.lr * c.min_lr_ratio;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(kPi * progress));
}

double clip_scale(const OptimConfig& c, double global_norm) {
  if (c.clip <= 0 || global_norm <= c.clip || !std::isfinite(global_norm)) return 1.0;
  return c.clip / global_norm;
}

// From the decayed slices alone, in order (they may touch or overlap): no per-float work. The
// optimizers call this for every unit at every update; a mask of n floats per unit was a copy of
// the whole model in bytes per update (gpu_quickstart, 160 M parameters: 380 ms on a 2-core VM; on
// an H200 host the GPU worker's step spent 110 of its 131 ms outside the forward and backward).
std::vector<DecayRun> decay_runs(const Dims& d, UnitKind kind, size_t n) {
  std::vector<Slice> slices = decayed(d, kind);
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) { return a.offset < b.offset; });
  std::vector<DecayRun> out;
  auto add = [&out](size_t begin, size_t end, bool decay) {
    if (begin >= end) return;
    if (!out.empty() && out.back().end == begin && out.back().decay == decay)
      out.back().end = end;
    else
      out.push_back({begin, end, decay});
  };
  size_t at = 0;
  for (const Slice& s : slices) {
    const size_t begin = std::min(std::max(size_t(s.offset), at), n);
    const size_t end = std::min(size_t(s.offset + s.size), n);
    add(at, begin, false);
    add(begin, end, true);
    at = std::max(at, end);
  }
  add(at, n, false);
  return out;
}

void adamw_unit(const Dims& d, Unit& u, const OptimConfig& c, double lr, double grad_scale, int64_t t) {
  if (grad_scale != 1.0) k::scale(u.g.data(), u.g.size(), float(grad_scale));
  for (const DecayRun& r : decay_runs(d, u.id.kind, u.w.size()))
    k::adamw(u.w.data() + r.begin, u.g.data() + r.begin, u.m.data() + r.begin, u.v.data() + r.begin, r.end - r.begin,
             float(lr), float(c.beta1), float(c.beta2), float(c.eps), r.decay ? float(c.weight_decay) : 0.0f, t);
}

void apply_adamw(Params& p, const OptimConfig& c, double lr, double grad_scale, int64_t t) {
  for (Unit* u : p.units())
    if (!u->frozen) adamw_unit(p.dims, *u, c, lr, grad_scale, t);  // frozen: replayed, that iteration's weights
}

double grad_sum_squares(const Unit& u) { return k::sum_squares(u.g.data(), u.g.size()); }

}  // namespace sal::model

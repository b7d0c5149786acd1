// checkpointing.cpp — see checkpointing.h.
#include "sim/checkpointing.h"

#include <algorithm>
#include <cmath>

#include "policy/algo/spare.h"
#include "policy/policy_set.h"
#include "sim/workload.h"

namespace sal::sim {
namespace {

// The model's operators as the checkpoint policy sees them: every expert of every real layer
// (a simulated layer stands for layer_weight of them), each layer's gate + dense part, the
// embeddings; popularity from the loads at step 0.
std::vector<policy::OperatorInfo> operators(const Scenario& s, const Workload& w) {
  const auto& wl = s.workload;
  const auto& m = s.step;
  auto real_layers = std::max<int64_t>(1, std::llround(wl.layers * wl.layer_weight));
  double dense_full = m.dense_state_bytes / double(real_layers + 1);
  double dense_compute = dense_full / 3;  // fp32 weights of 3 × fp32 (weights + two Adam moments)
  std::vector<policy::OperatorInfo> ops;
  const auto& shares = w.shares(0);
  for (int64_t l = 0; l < real_layers; ++l) {
    auto sim_layer = size_t(l % wl.layers);
    for (uint32_t e = 0; e < wl.experts; ++e)
      ops.push_back({"layer" + std::to_string(l) + ".expert" + std::to_string(e), "expert", int32_t(l), int32_t(e),
                     m.expert_state_bytes, m.expert_weight_bytes, shares[sim_layer][e] * wl.experts});
    ops.push_back({"layer" + std::to_string(l) + ".dense", "dense", int32_t(l), -1, dense_full, dense_compute, 0});
  }
  ops.push_back({"embedding", "embedding", -1, -1, dense_full, dense_compute, 0});
  return ops;
}

// W_sparse from the checkpoint policy (a real policy slot), and how far its largest snapshot
// overruns the iteration.
Result<std::pair<int64_t, double>> moetion_window(const StrategySpec& spec, const Scenario& s, const Workload& w,
                                                  double iter_s) {
  policy::PolicySet set;
  if (auto st = set.load(policy::Kind::checkpoint, spec.checkpoint.policy, "sim"); !st)
    return fail(spec.label, ": checkpoint.policy: ", st.error().message());
  double bandwidth = s.step.snapshot_Bps * s.cluster.gpus();
  policy::CheckpointInput in{operators(s, w), iter_s, bandwidth, 0, false, {}};
  auto d = set.slot(policy::Kind::checkpoint).decide(in);
  const auto& sched = std::get<policy::CheckpointProposal>(d.proposal);
  double largest = 0, compute_all = 0;
  for (const auto& op : in.operators) compute_all += op.compute_bytes;
  for (const auto& slot : sched.slots) {
    double bytes = compute_all;
    for (auto i : slot) bytes += in.operators[i].full_bytes - in.operators[i].compute_bytes;
    largest = std::max(largest, bytes);
  }
  return std::pair<int64_t, double>{int64_t(std::max<uint32_t>(1, sched.window)),
                                    std::max(0.0, largest / bandwidth - iter_s)};
}

}  // namespace

Result<CheckpointModel> CheckpointModel::make(const StrategySpec& spec, const Scenario& s, const Workload& w,
                                              double iter_s, double mtbr_s) {
  CheckpointModel c;
  c.spec_ = spec.checkpoint;
  // To the store, every node writes its share; to host memory, every GPU copies its own.
  double nodes = s.cluster.nodes, gpus = s.cluster.gpus(), bytes = w.checkpoint_bytes();
  double write_bw = spec.checkpoint.in_memory ? gpus * s.step.snapshot_Bps : nodes * s.step.ckpt_write_Bps;
  double read_bw = spec.checkpoint.in_memory ? gpus * s.step.snapshot_Bps : nodes * s.step.ckpt_read_Bps;
  using K = CheckpointSpec::Kind;
  switch (spec.checkpoint.kind) {
    case K::none: break;
    case K::dense:
      c.every_ = spec.checkpoint.every;
      c.write_s_ = bytes / write_bw;
      c.read_s_ = bytes / read_bw;
      break;
    case K::moc: {
      double expert_bytes = bytes - s.step.dense_state_bytes;
      c.every_ = spec.checkpoint.every;
      c.write_s_ = (s.step.dense_state_bytes + spec.checkpoint.fraction * expert_bytes) / write_bw;
      c.read_s_ = bytes / read_bw;
      break;
    }
    case K::oracle: {
      c.write_s_ = bytes / write_bw;
      c.read_s_ = bytes / read_bw;
      double mtbr = mtbr_s > 0 ? mtbr_s : 1e12;
      if (c.write_s_ <= 0) {  // free checkpoints: take one every step
        c.every_ = 1;
        break;
      }
      auto period = algo::optimal_checkpoint_period(c.write_s_, mtbr, spec.costs.restart_s + c.read_s_);
      if (!period) return fail(spec.label, ": oracle checkpoint interval: ", period.error().message());
      c.every_ = std::max<int64_t>(1, std::llround((*period - c.write_s_) / iter_s));
      break;
    }
    case K::moetion: {
      auto win = moetion_window(spec, s, w, iter_s);
      if (!win) return win.error();
      c.every_ = win->first;
      c.moetion_overrun_s_ = win->second;
      break;
    }
  }
  return c;
}

double CheckpointModel::cost_after(int64_t step, double step_s) const {
  (void)step_s;
  if (spec_.kind == CheckpointSpec::Kind::moetion) return moetion_overrun_s_;
  if (every_ <= 0 || step <= 0 || step % every_ != 0) return 0;
  return write_s_;
}

RestorePoint CheckpointModel::restore(int64_t step, double step_s) const {
  if (every_ <= 0) return {0, 0};
  int64_t boundary = step / every_ * every_;
  if (spec_.kind != CheckpointSpec::Kind::moetion) return {boundary, boundary > 0 ? read_s_ : 0};
  // The last complete window [boundary − W, boundary) is replayed with frozen operators to a dense
  // state at `boundary`; the steps after it are re-executed by the engine.
  if (boundary == 0) return {0, 0};
  return {boundary, double(every_) * spec_.replay_cost * step_s};
}

std::string CheckpointModel::describe() const {
  using K = CheckpointSpec::Kind;
  char buf[128];
  switch (spec_.kind) {
    case K::none: return "none";
    case K::dense: std::snprintf(buf, sizeof buf, "dense every %lld (%.3g s)", (long long)every_, write_s_); break;
    case K::oracle: std::snprintf(buf, sizeof buf, "oracle every %lld (%.3g s)", (long long)every_, write_s_); break;
    case K::moc: std::snprintf(buf, sizeof buf, "moc %.2g every %lld (%.3g s)", spec_.fraction, (long long)every_, write_s_); break;
    case K::moetion: std::snprintf(buf, sizeof buf, "moetion W=%lld", (long long)every_); break;
  }
  return buf;
}

}  // namespace sal::sim

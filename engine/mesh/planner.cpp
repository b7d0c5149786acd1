// planner.cpp — see planner.h.
#include "mesh/planner.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "plan/fixed_ep.h"

namespace sal::mesh {
namespace {

// Bytes per parameter: fp32 weights, and for a full snapshot also Adam's two moments.
constexpr double kComputeBytesPerParam = 4;
constexpr double kFullBytesPerParam = 12;
// Until iterations are timed, the checkpoint policy plans for this iteration time and a PCIe-class
// device-to-host bandwidth.
constexpr double kAssumedIterationS = 1.0;
constexpr double kAssumedBandwidth = 16e9;

policy::OperatorInfo op(std::string name, std::string kind, int32_t layer, int32_t expert, double params) {
  return {std::move(name), std::move(kind), layer, expert, params * kFullBytesPerParam,
          params * kComputeBytesPerParam, 0};
}

}  // namespace

std::vector<policy::OperatorInfo> model_operators(const job::ModelConfig& m) {
  double d = double(m.d_model), E = double(m.experts);
  std::vector<policy::OperatorInfo> ops;
  for (int32_t l = 0; l < int32_t(m.layers); ++l) {
    std::string layer = "layer" + std::to_string(l);
    for (int32_t e = 0; e < int32_t(m.experts); ++e)
      ops.push_back(op(layer + ".expert" + std::to_string(e), "expert", l, e, 8 * d * d + 5 * d));  // d->4d->d with biases
    ops.push_back(op(layer + ".gate", "gate", l, -1, d * E));
    ops.push_back(op(layer + ".dense", "dense", l, -1, 4 * d * d + 4 * d + 4 * d));  // attention + 2 LayerNorms
  }
  ops.push_back(op("embedding", "embedding", -1, -1, double(m.vocab) * d + double(m.seq_len) * d + 2 * d));
  return ops;
}

Planner::Planner(const job::JobConfig& job, std::function<void()> service)
    : job_(job),
      policies_(policy::PolicyOptions{job.policies.budget_ms, size_t(job.policies.memory_mb) << 20, {},
                                      std::move(service)}) {
  loads.assign(size_t(job.model.layers), std::vector<double>(size_t(job.model.experts), 1.0));
}

Status Planner::configure() {
  const auto& p = job_.policies;
  for (auto [kind, name] : {std::pair{policy::Kind::allocation, p.allocation}, std::pair{policy::Kind::placement, p.placement},
                            std::pair{policy::Kind::checkpoint, p.checkpoint}, std::pair{policy::Kind::redundancy, p.redundancy}}) {
    std::string what = name;
    if (what.size() > 4 && what.substr(what.size() - 4) == ".lua" && what[0] != '/') what = job_.dir + "/" + what;
    if (auto s = policies_.load(kind, what, "job file"); !s)
      return Error("policies." + std::string(policy::kind_name(kind)) + ": " + s.error().message());
  }
  return {};
}

Result<PlanRecord> Planner::replan(uint32_t workers, uint64_t epoch) {
  if (workers == 0) return fail("no ready workers to plan for");
  int64_t t0 = mono_ns();
  PlanRecord r;
  r.epoch = epoch;
  auto slots = uint32_t(job_.policies.slots), experts = uint32_t(job_.model.experts);
  if (uint64_t(workers) * slots < experts)
    return fail(workers, " workers x ", slots, " slots cannot hold ", experts, " experts once each");
  policy::AllocationInput ain{workers, slots, experts, uint32_t(job_.policies.min_replicas), loads};
  auto alloc = policies_.slot(policy::Kind::allocation).decide(ain);
  const auto& ap = std::get<policy::AllocationProposal>(alloc.proposal);
  policy::PlacementInput pin{workers, slots, experts, ap.floor, ap.replicas, loads, {}};
  if (current_ && current_->plan.nodes == workers)
    for (const auto& l : current_->plan.layers) pin.current.push_back(l.placement);
  auto place = policies_.slot(policy::Kind::placement).decide(pin);
  const auto& pp = std::get<policy::PlacementProposal>(place.proposal);
  policy::CheckpointInput cin{model_operators(job_.model), kAssumedIterationS, kAssumedBandwidth, 0, false, {}};
  if (current_) {
    cin.has_current = true;
    cin.current = current_->schedule;
  }
  auto ckpt = policies_.slot(policy::Kind::checkpoint).decide(cin);

  r.plan.nodes = workers;
  r.plan.slots = slots;
  r.plan.experts = experts;
  r.plan.floor = ap.floor;
  for (size_t l = 0; l < ap.replicas.size(); ++l) r.plan.layers.push_back({ap.replicas[l], pp.placement[l]});
  r.schedule = std::get<policy::CheckpointProposal>(ckpt.proposal);
  r.allocation_by = alloc.decided_by;
  r.placement_by = place.decided_by;
  r.checkpoint_by = ckpt.decided_by;
  r.note = ap.note;
  r.number = current_ ? current_->number + 1 : 1;
  r.ms = double(mono_ns() - t0) / 1e6;
  current_ = r;
  spdlog::info("plan {} for {} workers (epoch {}): allocation by {}, placement by {}, checkpoint by {} in {:.2f} ms{}",
               r.number, workers, epoch, r.allocation_by, r.placement_by, r.checkpoint_by, r.ms,
               r.note.empty() ? "" : " — " + r.note);
  return r;
}

Result<PlanRecord> Planner::fixed_ep(uint32_t groups, uint64_t epoch) {
  int64_t t0 = mono_ns();
  auto p = plan::fixed_ep_plan(uint32_t(job_.model.layers), uint32_t(job_.model.experts), uint32_t(job_.policies.slots),
                               groups);
  if (!p) return p.error();
  PlanRecord r;
  r.plan = std::move(*p);
  r.epoch = epoch;
  r.allocation_by = r.placement_by = r.checkpoint_by = "fixed-ep (" + job_.train.recovery + " baseline)";
  r.number = current_ ? current_->number + 1 : 1;
  r.ms = double(mono_ns() - t0) / 1e6;
  if (current_) r.schedule = current_->schedule;
  current_ = r;
  return r;
}

}  // namespace sal::mesh

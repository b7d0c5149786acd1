// policy_tools.cpp — see policy_tools.h.
#include "cli/policy_tools.h"

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "policy/kinds.h"

namespace sal::cli {

Result<plan::Plan> read_plan_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return fail(path, ": not JSON");
  auto plan = plan::plan_from_json(j);
  if (!plan) return plan.error().with_context(path);
  return plan;
}

Result<policy::Proposal> decide_offline(policy::PolicySet& set, policy::Kind kind, const std::string& what,
                                        const policy::Input& in) {
  auto g = set.check(kind, what);
  if (!g) return g.error().with_context(std::string(policy::kind_name(kind)) + " policy " + what);
  auto p = (*g)->decide(in);
  if (!p) return p.error().with_context((*g)->name());
  if (auto s = policy::ops_for(kind).validate(*p, in); !s)
    return s.error().with_context((*g)->name() + " proposed an invalid " + std::string(policy::kind_name(kind)));
  return p;
}

namespace {

constexpr uint32_t kNodes = 8, kSlots = 4, kExperts = 8;

std::vector<std::vector<double>> synthetic_loads() {
  std::vector<double> skewed(kExperts, 100.0), even(kExperts, 100.0);
  skewed[0] = 900.0;
  return {skewed, even};
}

std::vector<policy::OperatorInfo> synthetic_operators() {
  const double d = 256, expert = 8 * d * d, dense = 4 * d * d, gate = d * kExperts, embedding = 256 * d;
  std::vector<policy::OperatorInfo> ops{{"embedding", "embedding", -1, -1, 12 * embedding, 4 * embedding, 0}};
  for (int l = 0; l < 2; ++l) {
    const std::string layer = "layer" + std::to_string(l);
    ops.push_back({layer + ".dense", "dense", l, -1, 12 * dense, 4 * dense, 0});
    ops.push_back({layer + ".gate", "gate", l, -1, 12 * gate, 4 * gate, 0});
    for (int e = 0; e < int(kExperts); ++e)
      ops.push_back({layer + ".expert" + std::to_string(e), "expert", l, e, 12 * expert, 4 * expert,
                     e == 0 ? 0.5 : 0.5 / (kExperts - 1)});
  }
  return ops;
}

}  // namespace

policy::Input synthetic_input(policy::Kind kind) {
  switch (kind) {
    case policy::Kind::allocation:
      return policy::AllocationInput{kNodes, kSlots, kExperts, 2, synthetic_loads()};
    case policy::Kind::placement: {
      std::vector<uint32_t> replicas(kExperts, 3);
      replicas[0] = kNodes * kSlots - 3 * (kExperts - 1);  // 11: every slot filled
      return policy::PlacementInput{kNodes, kSlots, kExperts, 2, {replicas, replicas}, synthetic_loads(), {}};
    }
    case policy::Kind::checkpoint: {
      policy::CheckpointInput in;
      in.operators = synthetic_operators();
      in.iteration_s = 0.5;
      in.bandwidth_Bps = 16e9;
      return in;
    }
    case policy::Kind::redundancy:
      return policy::RedundancyInput{8, std::vector<bool>(8, true), 0, false, {}};
    case policy::Kind::health: {
      policy::HealthInput in;  // 8 workers, 8.0 at half speed for 600 steps
      in.step = 1000, in.min_workers = 4;
      for (uint32_t n = 1; n <= 8; ++n)
        in.workers.push_back({std::to_string(n) + ".0", n, n == 8 ? 2.0 : 1.0, n == 8 ? 2.0 : 1.0, n == 8, 20, n == 8 ? 400u : 0u, 1});
      return in;
    }
  }
  return policy::AllocationInput{};
}

std::string synthetic_context_text(policy::Kind kind) {
  switch (kind) {
    case policy::Kind::allocation: return "8 nodes x 4 slots, 8 experts in 2 layers, f = 2";
    case policy::Kind::placement: return "8 nodes x 4 slots, 8 experts in 2 layers, replicas 11 3 3 3 3 3 3 3";
    case policy::Kind::checkpoint: return "21 operators of 2 layers, 0.5 s iterations, 16 GB/s";
    case policy::Kind::redundancy: return "8 data-parallel groups, r of the policy's choosing";
    case policy::Kind::health: return "8 workers, 8.0 at half the others' speed for 600 steps";
  }
  return "";
}

Result<plan::Plan> plan_offline(policy::PolicySet& set, const PlanRequest& req, std::string* note,
                                policy::PlacementProposal* placement) {
  if (req.loads.empty()) return fail("no loads");
  auto experts = uint32_t(req.loads[0].size());
  if (uint64_t(req.nodes) * req.slots < experts)  // what the planner refuses in a job, before any policy
    return fail(req.nodes, " nodes x ", req.slots, " slots cannot hold ", experts, " experts once each");
  policy::AllocationInput ain{req.nodes, req.slots, experts, req.min_replicas, req.loads};
  auto a = decide_offline(set, policy::Kind::allocation, req.allocation, ain);
  if (!a) return a.error();
  const auto& ap = std::get<policy::AllocationProposal>(*a);
  if (note) *note = ap.note;
  policy::PlacementInput pin{req.nodes, req.slots, experts, ap.floor, ap.replicas, req.loads, req.current,
                             req.failures};
  pin.steps = req.steps;
  pin.moves = req.moves;
  auto p = decide_offline(set, policy::Kind::placement, req.placement, pin);
  if (!p) return p.error();
  const auto& pp = std::get<policy::PlacementProposal>(*p);
  if (placement) *placement = pp;
  plan::Plan out;
  out.nodes = req.nodes;
  out.slots = req.slots;
  out.experts = experts;
  out.floor = ap.floor;
  for (size_t l = 0; l < ap.replicas.size(); ++l) out.layers.push_back({ap.replicas[l], pp.placement[l]});
  return out;
}

}  // namespace sal::cli

// planned.cpp — see planned.h.
#include "sim/strategies/planned.h"

#include <algorithm>

namespace sal::sim {

Result<Holdings::Change> Holdings::apply(const plan::Plan& p, const std::vector<bool>& up, const Scenario& s) const {
  Change c;
  auto remap = plan::greedy_remap(held_, up, p);
  if (!remap) return remap.error();
  c.remap = std::move(*remap);
  if (placed_.empty()) return c;  // nothing held (a start or a restore): state comes from the checkpoint
  auto transfers = plan::transfer_schedule(held_, up, p, c.remap);
  if (!transfers) return transfers.error();
  std::vector<uint64_t> in(up.size()), out(up.size());
  for (const auto& t : *transfers) {
    ++in[t.to_node];
    ++out[t.from_node];
  }
  uint64_t busiest = 0;
  for (size_t n = 0; n < up.size(); ++n) busiest = std::max({busiest, in[n], out[n]});
  c.transfers = transfers->size();
  c.migrate_s = double(busiest) * s.workload.layer_weight * s.step.expert_state_bytes / s.step.p2p_Bps;
  return c;
}

void Holdings::commit(const plan::Plan& p, const Change& c) {
  for (auto& node : held_) node.clear();
  placed_.assign(p.layers.size(), algo::LayerPlacement{int(p.experts), {}});
  for (size_t pos = 0; pos < c.remap.node_of_position.size(); ++pos) {
    auto node = size_t(c.remap.node_of_position[pos]);
    held_[node].resize(p.layers.size());
    for (size_t l = 0; l < p.layers.size(); ++l) {
      held_[node][l] = p.layers[l].placement[pos];
      placed_[l].nodes.emplace_back(p.layers[l].placement[pos].begin(), p.layers[l].placement[pos].end());
    }
  }
  curve_.clear();
}

void Holdings::clear() {
  for (auto& node : held_) node.clear();
  placed_.clear();
  curve_.clear();
}

void Holdings::lose(uint32_t node) { held_[node].clear(); }

bool Holdings::holds(uint32_t node) const { return !held_[node].empty(); }

bool Holdings::complete(uint32_t experts) const {
  size_t layers = placed_.size();
  for (size_t l = 0; l < layers; ++l) {
    std::vector<bool> seen(experts, false);
    for (const auto& node : held_)
      if (l < node.size())
        for (auto e : node[l]) seen[e] = true;
    if (std::find(seen.begin(), seen.end(), false) != seen.end()) return false;
  }
  return layers > 0;
}

double Holdings::p_survive_next(int k) {
  double before = k <= 1 ? 1.0 : p_survive(k - 1), now = p_survive(k);
  if (before <= 0 || now < 0) return -1;
  return now / before;
}

double Holdings::p_survive(int k) {
  if (placed_.empty()) return -1;
  if (k <= 0) return 1;
  auto it = curve_.find(k);
  if (it != curve_.end()) return it->second;
  auto est = algo::joint_recovery_probability(placed_, k);
  double p = est ? est->p : -1;
  curve_[k] = p;
  return p;
}

}  // namespace sal::sim

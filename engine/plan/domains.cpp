// domains.cpp — see domains.h.
#include "plan/domains.h"

#include <algorithm>
#include <map>
#include <set>

namespace sal::plan {
namespace {

// The (group, layer, expert) keys position `pos` holds, each once.
std::vector<uint64_t> keys_of(const Plan& p, uint32_t pos) {
  const uint64_t group = group_of(p, pos).group;
  std::vector<uint64_t> keys;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (pos >= p.layers[l].placement.size()) continue;
    std::set<ExpertId> seen(p.layers[l].placement[pos].begin(), p.layers[l].placement[pos].end());
    for (ExpertId e : seen) keys.push_back((group * p.layers.size() + l) * uint64_t(p.experts) + e);
  }
  return keys;
}

// Per (group, layer, expert), how many positions of each domain hold it.
class Census {
 public:
  explicit Census(uint32_t domains) : domains_(domains) {}
  uint64_t cost(const std::vector<uint64_t>& keys, uint32_t d) const {
    uint64_t c = 0;
    for (uint64_t k : keys)
      if (auto it = counts_.find(k); it != counts_.end()) c += it->second[d];
    return c;
  }
  void add(const std::vector<uint64_t>& keys, uint32_t d) {
    for (uint64_t k : keys) {
      auto& row = counts_[k];
      if (row.empty()) row.assign(domains_, 0);
      ++row[d];
    }
  }
  uint64_t pairs() const {
    uint64_t n = 0;
    for (const auto& [k, row] : counts_)
      for (uint32_t c : row) n += uint64_t(c) * (c - (c > 0)) / 2;
    return n;
  }

 private:
  uint32_t domains_;
  std::map<uint64_t, std::vector<uint32_t>> counts_;
};

}  // namespace

uint32_t domain_count(const std::vector<uint32_t>& labels) {
  return labels.empty() ? 0 : *std::max_element(labels.begin(), labels.end()) + 1;
}

std::vector<uint32_t> domain_sizes(const std::vector<uint32_t>& labels) {
  std::vector<uint32_t> room(domain_count(labels), 0);
  for (uint32_t d : labels) ++room[d];
  return room;
}

std::vector<uint32_t> first_seen_labels(const std::vector<uint32_t>& ids) {
  std::map<uint32_t, uint32_t> label;
  std::vector<uint32_t> out;
  for (uint32_t id : ids) out.push_back(label.emplace(id, uint32_t(label.size())).first->second);
  return out;
}

bool shares_domains(const std::vector<uint32_t>& labels) {
  return std::set<uint32_t>(labels.begin(), labels.end()).size() < labels.size();
}

uint64_t colocated(const Plan& p, const std::vector<uint32_t>& labels) {
  Census census(domain_count(labels));
  for (uint32_t pos = 0; pos < p.nodes && pos < labels.size(); ++pos) census.add(keys_of(p, pos), labels[pos]);
  return census.pairs();
}

std::vector<uint32_t> deal_domains(const Plan& p, const std::vector<uint32_t>& labels_of_workers,
                                   const std::vector<uint32_t>* keep) {
  std::vector<uint32_t> room = domain_sizes(labels_of_workers);
  const uint32_t domains = uint32_t(room.size());
  Census census(domains);
  std::vector<uint32_t> out;
  for (uint32_t pos = 0; pos < p.nodes; ++pos) {
    auto keys = keys_of(p, pos);
    uint32_t best = domains;
    uint64_t best_cost = 0;
    for (uint32_t d = 0; d < domains; ++d) {
      if (room[d] == 0) continue;
      uint64_t c = census.cost(keys, d);
      // fewest replicas of the same experts there; then the most room left; then the lowest label
      if (best == domains || c < best_cost || (c == best_cost && room[d] > room[best])) best = d, best_cost = c;
    }
    if (best == domains) return {};  // fewer workers than positions: the caller asked wrongly
    --room[best];
    census.add(keys, best);
    out.push_back(best);
  }
  if (keep && keep->size() == out.size() && domain_sizes(*keep) == domain_sizes(labels_of_workers) &&
      colocated(p, *keep) <= census.pairs())
    return *keep;
  return out;
}

std::vector<std::vector<ExpertId>> fold_onto_domains(const LayerPlan& layer, const std::vector<uint32_t>& labels) {
  std::vector<std::vector<ExpertId>> out(domain_count(labels));
  for (size_t pos = 0; pos < layer.placement.size() && pos < labels.size(); ++pos)
    out[labels[pos]].insert(out[labels[pos]].end(), layer.placement[pos].begin(), layer.placement[pos].end());
  return out;
}

Status check_domains(const Plan& p) {
  if (p.domains.empty()) return {};
  if (p.domains.size() != p.nodes)
    return fail("plan: domains has ", p.domains.size(), " labels for ", p.nodes, " positions");
  std::vector<uint32_t> room = domain_sizes(p.domains);
  for (uint32_t d = 0; d < room.size(); ++d)
    if (room[d] == 0) return fail("plan: domain ", d, " has no position (labels must be 0..D-1, each used)");
  return {};
}

}  // namespace sal::plan

// recovery_family.cpp — see recovery_family.h.
//
// Minimality is tested by counting: a candidate A contains an accepted set B iff, walking A's nodes
// through the node -> accepted-sets index, B is hit |B| times. Candidates come by increasing size,
// so every set that could be inside A was accepted (or found redundant) before A is examined.
#include "policy/algo/recovery_family.h"

#include <algorithm>

namespace sal::algo::detail {
namespace {

Status check_layer(const LayerPlacement& layer, size_t index, size_t nodes) {
  if (layer.experts < 0) return fail("layer ", index, ": negative expert count ", layer.experts);
  if (layer.nodes.size() != nodes)
    return fail("layer ", index, " has ", layer.nodes.size(), " nodes, layer 0 has ", nodes);
  for (size_t n = 0; n < layer.nodes.size(); ++n)
    for (size_t s = 0; s < layer.nodes[n].size(); ++s) {
      const int e = layer.nodes[n][s];
      if (e < 0 || e >= layer.experts)
        return fail("layer ", index, " node ", n, " slot ", s, ": expert ", e, " outside 0..",
                    layer.experts - 1);
    }
  return ok_status();
}

// The distinct nodes of each expert of one layer (ascending, as nodes are visited in order).
std::vector<NodeSet> expert_node_sets(const LayerPlacement& layer) {
  std::vector<NodeSet> sets(size_t(layer.experts));
  for (size_t n = 0; n < layer.nodes.size(); ++n)
    for (int e : layer.nodes[n])
      if (sets[e].empty() || sets[e].back() != int(n)) sets[e].push_back(int(n));
  return sets;
}

bool by_size_then_nodes(const NodeSet& a, const NodeSet& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

class MinimalFilter {
 public:
  explicit MinimalFilter(int nodes) : sets_of_node_(size_t(nodes)) {}

  // Accepts `s` unless it contains an accepted set.
  void offer(NodeSet s) {
    if (contains_accepted(s)) return;
    for (int n : s) sets_of_node_[n].push_back(accepted_.size());
    hits_.push_back(0);
    accepted_.push_back(std::move(s));
  }

  std::vector<NodeSet> take() { return std::move(accepted_); }

 private:
  bool contains_accepted(const NodeSet& s) {
    bool found = false;
    touched_.clear();
    for (int n : s)
      for (size_t b : sets_of_node_[n]) {
        if (hits_[b]++ == 0) touched_.push_back(b);
        if (hits_[b] == accepted_[b].size()) found = true;
      }
    for (size_t b : touched_) hits_[b] = 0;
    return found;
  }

  std::vector<std::vector<size_t>> sets_of_node_;
  std::vector<NodeSet> accepted_;
  std::vector<size_t> hits_;
  std::vector<size_t> touched_;
};

size_t first_overlap(const std::vector<NodeSet>& sets, int nodes) {
  std::vector<char> used(size_t(nodes), 0);
  for (size_t i = 0; i < sets.size(); ++i) {
    for (int n : sets[i])
      if (used[n]) return i;
    for (int n : sets[i]) used[n] = 1;
  }
  return sets.size();
}

}  // namespace

size_t FailureFamily::count_at_most(int k) const {
  auto it = std::upper_bound(minimal.begin(), minimal.end(), size_t(std::max(k, 0)),
                             [](size_t size, const NodeSet& s) { return size < s.size(); });
  return size_t(it - minimal.begin());
}

Result<FailureFamily> build_family(const std::vector<LayerPlacement>& layers, int max_size) {
  FailureFamily f;
  if (layers.empty()) return fail("no layers given");
  const size_t nodes = layers[0].nodes.size();
  f.nodes = int(nodes);
  std::vector<NodeSet> candidates;
  for (size_t i = 0; i < layers.size(); ++i) {
    SAL_TRY(check_layer(layers[i], i, nodes));
    f.experts += layers[i].experts;
    for (auto& s : expert_node_sets(layers[i])) {
      if (s.empty()) f.unreplicated = true;
      else if (s.size() <= size_t(std::max(max_size, 0))) candidates.push_back(std::move(s));
    }
  }
  std::sort(candidates.begin(), candidates.end(), by_size_then_nodes);
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  MinimalFilter filter(f.nodes);
  for (auto& s : candidates) filter.offer(std::move(s));
  f.minimal = filter.take();
  f.disjoint_prefix = first_overlap(f.minimal, f.nodes);
  return f;
}

}  // namespace sal::algo::detail

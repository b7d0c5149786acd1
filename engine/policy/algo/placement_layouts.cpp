// placement_layouts.cpp — see placement_layouts.h.
#include "policy/algo/placement_layouts.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "policy/algo/open_slots.h"

namespace sal::algo {
namespace {

// Where a block does not fit at the cursor (its nodes lack room for the group), the next starts
// tried, one node further each. Blocks fit at the cursor unless the layer is nearly all blocks; the
// bound keeps a large layer's search short, and a group that finds no room is dealt like extras.
constexpr int kWindowTries = 64;

Status check(const LayerDemand& d, int nodes, int slots) {
  if (nodes <= 0 || slots <= 0) return fail("a layer needs nodes and slots (", nodes, " x ", slots, ")");
  if (d.loads.size() != d.replicas.size())
    return fail(d.loads.size(), " loads for ", d.replicas.size(), " experts");
  int64_t total = 0;
  for (size_t e = 0; e < d.replicas.size(); ++e) {
    if (d.replicas[e] < 0) return fail("expert ", e, " has ", d.replicas[e], " replicas");
    if (!(d.loads[e] >= 0)) return fail("expert ", e, " has load ", d.loads[e], "; loads must be >= 0");
    total += d.replicas[e];
  }
  if (total != int64_t(nodes) * slots)
    return fail("the replicas add up to ", total, ", not to the ", int64_t(nodes) * slots, " slots of ", nodes,
                " nodes x ", slots);
  return {};
}

// A layer being filled: the slot lists, each node's work, how many replicas of each expert each
// node holds.
class Filling {
 public:
  Filling(const LayerDemand& d, int nodes, int slots)
      : d_(d), slots_(slots), layer_{int(d.replicas.size()), std::vector<std::vector<int>>(size_t(nodes))},
        work_(size_t(nodes), 0), units_(d.replicas.size(), std::vector<int>(size_t(nodes), 0)),
        left_(d.replicas) {}

  int nodes() const { return int(layer_.nodes.size()); }
  int experts() const { return int(units_.size()); }
  double weight(int e) const { return d_.replicas[size_t(e)] > 0 ? d_.loads[size_t(e)] / d_.replicas[size_t(e)] : 0; }
  int room(int n) const { return slots_ - int(layer_.nodes[size_t(n)].size()); }
  int units(int e, int n) const { return units_[size_t(e)][size_t(n)]; }
  bool holds(int e, int n) const { return units(e, n) > 0; }
  int left(int e) const { return left_[size_t(e)]; }
  const std::vector<int>& slots_of(int n) const { return layer_.nodes[size_t(n)]; }
  int span(int e) const {
    int s = 0;
    for (int u : units_[size_t(e)]) s += u > 0;
    return s;
  }

  void put(int e, int n) {
    layer_.nodes[size_t(n)].push_back(e);
    work_[size_t(n)] += weight(e);
    ++units_[size_t(e)][size_t(n)];
    --left_[size_t(e)];
  }
  // One replica of a on node m trades places with one of b on node n.
  void swap(int a, int m, int b, int n) {
    *std::find(layer_.nodes[size_t(m)].begin(), layer_.nodes[size_t(m)].end(), a) = b;
    *std::find(layer_.nodes[size_t(n)].begin(), layer_.nodes[size_t(n)].end(), b) = a;
    --units_[size_t(a)][size_t(m)], ++units_[size_t(a)][size_t(n)];
    --units_[size_t(b)][size_t(n)], ++units_[size_t(b)][size_t(m)];
    const double d = weight(a) - weight(b);
    work_[size_t(m)] -= d;
    work_[size_t(n)] += d;
  }
  const std::vector<double>& work() const { return work_; }
  LayerPlacement take() { return std::move(layer_); }

 private:
  const LayerDemand& d_;
  int slots_;
  LayerPlacement layer_;
  std::vector<double> work_;
  std::vector<std::vector<int>> units_;  // [e][n]
  std::vector<int> left_;
};

// Experts with replicas from the least to the most replicated; ties: more load first, then id.
std::vector<int> ascending(const LayerDemand& d) {
  std::vector<int> order;
  for (size_t e = 0; e < d.replicas.size(); ++e)
    if (d.replicas[e] > 0) order.push_back(int(e));
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (d.replicas[size_t(a)] != d.replicas[size_t(b)]) return d.replicas[size_t(a)] < d.replicas[size_t(b)];
    if (d.loads[size_t(a)] != d.loads[size_t(b)]) return d.loads[size_t(a)] > d.loads[size_t(b)];
    return a < b;
  });
  return order;
}

// Within each run of equally replicated experts (hottest first), deals them over the groups of
// `group` positions the run covers in snake order, so no group gathers the hot ones. Equally
// replicated experts are interchangeable for recovery: only the load changes.
std::vector<int> spread_runs(const std::vector<int>& order, const LayerDemand& d, int group) {
  std::vector<int> out;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && d.replicas[size_t(order[j + 1])] == d.replicas[size_t(order[i])]) ++j;
    // the run's positions i..j by group: members[k] fills the k-th group it touches
    std::vector<std::vector<int>> members;
    std::vector<size_t> capacity;
    for (size_t pos = i; pos <= j; ++pos) {
      if (pos == i || pos % size_t(group) == 0) members.emplace_back(), capacity.push_back(0);
      ++capacity.back();
    }
    int k = 0, step = 1;
    const int groups = int(members.size());
    for (size_t pos = i; pos <= j; ++pos) {
      while (members[size_t(k)].size() >= capacity[size_t(k)]) {
        k += step;
        if (k < 0 || k >= groups) step = -step, k += step;
      }
      members[size_t(k)].push_back(order[pos]);
      k += step;
      if (k < 0 || k >= groups) step = -step, k += step;
    }
    for (const auto& m : members) out.insert(out.end(), m.begin(), m.end());
    i = j + 1;
  }
  return out;
}

// The first start from `cursor` (trying kWindowTries) whose `size` consecutive nodes, round the
// ring, each have room for `members` more replicas; -1 when none.
int block_start(const Filling& f, int cursor, int size, int members) {
  for (int t = 0; t < std::min(kWindowTries, f.nodes()); ++t) {
    const int start = (cursor + t) % f.nodes();
    bool fits = true;
    for (int i = 0; i < size && fits; ++i) fits = f.room((start + i) % f.nodes()) >= members;
    if (fits) return start;
  }
  return -1;
}

// Blocks of `group` experts from node 0 on; the next block starts where the last one ended, or,
// `chained`, one node after where it started (so consecutive blocks share all but one node).
void lay_blocks(Filling& f, const std::vector<int>& order, const LayerDemand& d, int group, bool chained) {
  int cursor = 0;
  for (size_t i = 0; i < order.size(); i += size_t(group)) {
    const size_t end = std::min(order.size(), i + size_t(group));
    int size = f.nodes();
    for (size_t m = i; m < end; ++m) size = std::min(size, d.replicas[size_t(order[m])]);
    const int start = block_start(f, cursor, size, int(end - i));
    if (start < 0) continue;  // no room: the group's replicas are dealt with the extras
    for (size_t m = i; m < end; ++m)
      for (int k = 0; k < size; ++k) f.put(order[m], (start + k) % f.nodes());
    cursor = (start + (chained ? 1 : size)) % f.nodes();
  }
}

// Every replica not yet placed, heaviest first, to the least loaded nodes with room that do not
// hold its expert yet; a second copy on a node only when no such node is left.
Status deal_extras(Filling& f, const LayerDemand& d) {
  std::vector<int> holes(size_t(f.nodes()));
  for (int n = 0; n < f.nodes(); ++n) holes[size_t(n)] = f.room(n);
  OpenSlots open(f.work(), std::move(holes));
  std::vector<int> experts(d.replicas.size());
  std::iota(experts.begin(), experts.end(), 0);
  std::stable_sort(experts.begin(), experts.end(), [&](int a, int b) { return f.weight(a) > f.weight(b); });
  for (int e : experts) {
    while (f.left(e) > 0) {
      auto nodes = open.take(size_t(f.left(e)), [&](int n) { return !f.holds(e, n); });
      if (nodes.empty()) nodes = open.take(size_t(f.left(e)), [](int) { return true; });  // copies
      if (nodes.empty()) return fail("no free slot left for expert ", e);
      for (int n : nodes) {
        f.put(e, n);
        open.fill(n, f.weight(e));
      }
    }
  }
  return {};
}

// Where the deal left an expert on too few nodes (the last free slots were on nodes holding it),
// a second copy of it trades places with a replica x of another node that does not hold it, x
// going to a node that does not hold x — so x keeps its span and the expert gains a node. Of the
// trades, the one that changes the nodes' work least.
void repair_spans(Filling& f, const LayerDemand& d, int floor) {
  for (int e = 0; e < f.experts(); ++e) {
    const int need = std::min({floor, f.nodes(), d.replicas[size_t(e)]});
    while (f.span(e) < need) {
      int best_n = -1, best_m = -1, best_x = -1;
      double best = 0;
      for (int n = 0; n < f.nodes(); ++n) {
        if (f.units(e, n) < 2) continue;
        for (int m = 0; m < f.nodes(); ++m) {
          if (f.holds(e, m)) continue;
          for (int x : f.slots_of(m)) {
            if (f.holds(x, n)) continue;
            const double change = std::fabs(f.weight(x) - f.weight(e));
            if (best_x < 0 || change < best) best = change, best_n = n, best_m = m, best_x = x;
          }
        }
      }
      if (best_x < 0) break;  // no trade exists: the frontier drops the layout
      f.swap(e, best_n, best_x, best_m);
    }
  }
}

// How many experts each pair of nodes holds in common, kept as the replicas of one expert after
// another are put; and, for the expert being put, what each node shares with its holders so far
// (kept as holders are added, so a put costs O(nodes), not O(nodes^2): 1024 nodes took seconds).
class Overlap {
 public:
  explicit Overlap(int nodes) : n_(size_t(nodes)), common_(n_ * n_, 0), shared_(n_, 0) {}
  // The next expert to put: no holder yet.
  void begin() {
    holders_.clear();
    std::fill(shared_.begin(), shared_.end(), 0);
  }
  // The expert goes on node n, which does not hold it yet: n now shares it with its holders.
  void add(int n) {
    for (int h : holders_) ++common_[size_t(n) * n_ + size_t(h)], ++common_[size_t(h) * n_ + size_t(n)];
    for (size_t m = 0; m < n_; ++m)
      if (int(m) != n) shared_[m] += common_[m * n_ + size_t(n)];
    shared_[size_t(n)] += int(holders_.size());
    holders_.push_back(n);
  }
  // What node n shares with the expert's holders (itself left out): the experts in common, summed
  // over them.
  int with_holders(int n) const { return shared_[size_t(n)]; }

 private:
  size_t n_;
  std::vector<int> common_;  // [n][m]
  std::vector<int> shared_;  // [n]: sum of common_[n][h] over the holders h != n
  std::vector<int> holders_;
};

// The node with room for one more replica of e: not holding e when one is left, then the fewest
// experts in common with e's holders, then the most room, then the lowest number; -1 when full.
int mixed_node(const Filling& f, const Overlap& o, int e) {
  // smaller is better, compared in order: holds e already, experts shared, minus the room
  using Rank = std::tuple<bool, int, int>;
  int best = -1;
  Rank best_rank{};
  for (int n = 0; n < f.nodes(); ++n) {
    if (f.room(n) == 0) continue;
    const Rank rank{f.holds(e, n), o.with_holders(n), -f.room(n)};
    if (best < 0 || rank < best_rank) best = n, best_rank = rank;
  }
  return best;
}

// Blocks of `group` experts (0: none), chained or not, then the other replicas dealt and the
// spans repaired.
Result<LayerPlacement> laid_out(const LayerDemand& layer, int nodes, int slots, int group, bool chained, int floor) {
  SAL_TRY(check(layer, nodes, slots));
  Filling f(layer, nodes, slots);
  if (group > 0) lay_blocks(f, spread_runs(ascending(layer), layer, group), layer, group, chained);
  SAL_TRY(deal_extras(f, layer));
  repair_spans(f, layer, floor);
  return f.take();
}

}  // namespace

Result<LayerPlacement> blocks_layout(const LayerDemand& layer, int nodes, int slots, int group, int floor) {
  if (group < 0 || group > slots) return fail("experts per block must be in 0..", slots, ", not ", group);
  return laid_out(layer, nodes, slots, group, false, floor);
}

Result<LayerPlacement> chain_layout(const LayerDemand& layer, int nodes, int slots, int floor) {
  return laid_out(layer, nodes, slots, 1, true, floor);
}

Result<LayerPlacement> mixed_layout(const LayerDemand& layer, int nodes, int slots, int floor) {
  SAL_TRY(check(layer, nodes, slots));
  Filling f(layer, nodes, slots);
  Overlap overlap(nodes);
  std::vector<int> experts(layer.replicas.size());
  std::iota(experts.begin(), experts.end(), 0);
  // by replicas, not load: layers with the same counts get the same holder sets, so their minimal
  // sets line up (the balancer then moves experts between sets by load)
  std::stable_sort(experts.begin(), experts.end(),
                   [&](int a, int b) { return layer.replicas[size_t(a)] > layer.replicas[size_t(b)]; });
  for (int e : experts) {
    overlap.begin();
    while (f.left(e) > 0) {
      const int n = mixed_node(f, overlap, e);
      if (n < 0) return fail("no free slot left for expert ", e);
      if (!f.holds(e, n)) overlap.add(n);
      f.put(e, n);
    }
  }
  repair_spans(f, layer, floor);
  return f.take();
}

bool spans_floor(const LayerPlacement& layer, const std::vector<int>& replicas, int floor) {
  const int N = int(layer.nodes.size());
  std::vector<int> span(replicas.size(), 0), last(replicas.size(), -1);
  for (int n = 0; n < N; ++n)
    for (int e : layer.nodes[size_t(n)])
      if (e >= 0 && size_t(e) < span.size() && last[size_t(e)] != n) ++span[size_t(e)], last[size_t(e)] = n;
  for (size_t e = 0; e < replicas.size(); ++e)
    if (span[e] < std::min({floor, N, replicas[e]})) return false;
  return true;
}

double balance_bound(const LayerDemand& layer, int nodes) {
  double total = 0, most = 0;
  for (size_t e = 0; e < layer.loads.size(); ++e) {
    total += layer.loads[e];
    if (layer.replicas[e] > 0) most = std::max(most, layer.loads[e] / std::min(layer.replicas[e], nodes));
  }
  return total > 0 ? std::max(1.0, most * nodes / total) : 1.0;
}

}  // namespace sal::algo

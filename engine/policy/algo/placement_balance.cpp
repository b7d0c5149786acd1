// placement_balance.cpp — see placement_balance.h. Node sets are bitsets over the layer's nodes;
// the family of minimal sets is built once from the start and every move is checked against it.
#include "policy/algo/placement_balance.h"

#include "policy/algo/open_slots.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <unordered_map>

namespace sal::algo {
namespace {

using Bits = std::vector<uint64_t>;

// Candidate moves scored in phase 2 when the caller sets no budget: kBudgetWork / N, between the
// bounds — a few milliseconds on any layer (a step scores moves from the busiest node to others,
// so large layers pay more per step, and their phase-1 deal leaves less to do).
constexpr uint64_t kBudgetWork = 20'000'000, kMinEvaluations = 20'000, kMaxEvaluations = 400'000;

bool subset(const Bits& a, const Bits& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] & ~b[i]) return false;
  return true;
}

int popcount(const Bits& a) {
  int n = 0;
  for (uint64_t w : a) n += __builtin_popcountll(w);
  return n;
}

bool has(const Bits& a, int n) { return (a[size_t(n) / 64] >> (n % 64)) & 1; }
void put(Bits& a, int n) { a[size_t(n) / 64] |= uint64_t(1) << (n % 64); }
void drop(Bits& a, int n) { a[size_t(n) / 64] &= ~(uint64_t(1) << (n % 64)); }

std::vector<int> members(const Bits& a, int nodes) {
  std::vector<int> out;
  for (int n = 0; n < nodes; ++n)
    if (has(a, n)) out.push_back(n);
  return out;
}

std::string key(const Bits& a) { return std::string(reinterpret_cast<const char*>(a.data()), a.size() * 8); }

// The layer as the balancer changes it: units[e][n], node slot lists, per-replica work, node work.
struct BalanceLayout {
  int N = 0, E = 0, words = 0;
  std::vector<std::vector<int>> nodes;
  std::vector<std::vector<int>> units;  // [e][n]
  std::vector<int> replicas, need;      // r_e; the distinct nodes e must span
  std::vector<double> w;                // load_e / r_e
  std::vector<double> work;             // W_n
  std::vector<Bits> sets;               // S_e

  void recompute() {  // (the rows are cleared in place: a 1024-node layer reuses their memory)
    units.resize(size_t(E));
    for (auto& row : units) row.assign(size_t(N), 0);
    replicas.assign(size_t(E), 0);
    sets.resize(size_t(E));
    for (auto& set : sets) set.assign(size_t(words), 0);
    for (int n = 0; n < N; ++n)
      for (int e : nodes[size_t(n)]) {
        if (units[size_t(e)][size_t(n)]++ == 0) put(sets[size_t(e)], n);
        ++replicas[size_t(e)];
      }
    work.assign(size_t(N), 0);
    for (int n = 0; n < N; ++n)
      for (int e : nodes[size_t(n)]) work[size_t(n)] += w[size_t(e)];
  }
  // One unit of a on node m trades places with one unit of b on node n (slot lists, units, sets;
  // not the work).
  void swap_units(int a, int m, int b, int n) {
    auto& at_m = nodes[size_t(m)];
    *std::find(at_m.begin(), at_m.end(), a) = b;
    auto& at_n = nodes[size_t(n)];
    *std::find(at_n.begin(), at_n.end(), b) = a;
    shift(a, m, n);
    shift(b, n, m);
  }

 private:
  void shift(int e, int from, int to) {
    if (--units[size_t(e)][size_t(from)] == 0) drop(sets[size_t(e)], from);
    if (units[size_t(e)][size_t(to)]++ == 0) put(sets[size_t(e)], to);
  }
};

double imbalance_of(const std::vector<double>& work) {
  double most = 0, sum = 0;
  for (double x : work) most = std::max(most, x), sum += x;
  return sum > 0 ? most * double(work.size()) / sum : 1;
}

// The family of inclusion-minimal node sets of a layout, with how many experts realize each (hold
// exactly its nodes).
class Family {
 public:
  explicit Family(const BalanceLayout& L) {
    std::map<std::string, Bits> distinct;
    for (int e = 0; e < L.E; ++e)
      if (L.replicas[size_t(e)] > 0) distinct.emplace(key(L.sets[size_t(e)]), L.sets[size_t(e)]);
    std::vector<std::pair<int, Bits>> all;  // (size, set), smallest first
    for (auto& [k, s] : distinct) all.push_back({popcount(s), s});
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < all.size(); ++i) {
      bool minimal = true;
      for (size_t j = 0; j < i && minimal && all[j].first < all[i].first; ++j)
        minimal = !subset(all[j].second, all[i].second);
      if (!minimal) continue;
      index_[key(all[i].second)] = int(sets_.size());
      sets_.push_back(all[i].second);
      sizes_.push_back(all[i].first);
      members_.push_back(members(all[i].second, L.N));
    }
    realized_.assign(sets_.size(), 0);
    eq_.assign(size_t(L.E), -1);
    for (int e = 0; e < L.E; ++e) {
      if (L.replicas[size_t(e)] == 0) continue;
      eq_[size_t(e)] = find(L.sets[size_t(e)]);
      if (eq_[size_t(e)] >= 0) ++realized_[size_t(eq_[size_t(e)])];
    }
  }

  int find(const Bits& s) const {
    auto it = index_.find(key(s));
    return it == index_.end() ? -1 : it->second;
  }
  size_t size() const { return sets_.size(); }
  const Bits& set(size_t f) const { return sets_[f]; }
  int set_size(size_t f) const { return sizes_[f]; }
  const std::vector<int>& nodes_of(size_t f) const { return members_[f]; }
  int realizes(int e) const { return eq_[size_t(e)]; }
  int realized(size_t f) const { return realized_[f]; }
  // The smallest minimal set inside s.
  int anchor(const Bits& s) const {
    for (size_t f = 0; f < sets_.size(); ++f)
      if (subset(sets_[f], s)) return int(f);
    return -1;
  }
  bool same_sets(const Family& o) const {
    if (index_.size() != o.index_.size()) return false;
    for (const auto& [k, f] : index_)
      if (!o.index_.count(k)) return false;
    return true;
  }

  // Whether experts changed[i] taking node sets after[i] keeps the family (see the header), and
  // each still spans enough nodes. Commits the realizer counts when `apply`.
  bool keeps(const BalanceLayout& L, const std::vector<int>& changed, const std::vector<Bits>& after, bool apply) {
    std::vector<std::pair<int, int>> delta;  // (set, +-1)
    std::vector<int> now(changed.size());
    for (size_t i = 0; i < changed.size(); ++i) {
      const int e = changed[i];
      if (popcount(after[i]) < L.need[size_t(e)]) return false;
      if (eq_[size_t(e)] >= 0) delta.push_back({eq_[size_t(e)], -1});
      now[i] = find(after[i]);
      if (now[i] >= 0) delta.push_back({now[i], +1});
    }
    auto realized_after = [&](int f) {
      int r = realized_[size_t(f)];
      for (auto [g, d] : delta) r += g == f ? d : 0;
      return r;
    };
    for (auto [f, d] : delta)
      if (realized_after(f) < 1) return false;
    for (size_t i = 0; i < changed.size(); ++i) {
      if (now[i] >= 0) continue;
      bool anchored = false;
      for (size_t f = 0; f < sets_.size() && !anchored; ++f)
        anchored = subset(sets_[f], after[i]) && realized_after(int(f)) >= 1;
      if (!anchored) return false;
    }
    if (apply) {
      for (auto [f, d] : delta) realized_[size_t(f)] += d;
      for (size_t i = 0; i < changed.size(); ++i) eq_[size_t(changed[i])] = now[i];
    }
    return true;
  }

 private:
  std::vector<Bits> sets_;
  std::vector<int> sizes_;
  std::vector<std::vector<int>> members_;  // the nodes of each set
  std::unordered_map<std::string, int> index_;
  std::vector<int> realized_;
  std::vector<int> eq_;  // per expert: the minimal set it realizes, or -1
};

Result<BalanceLayout> make_layout(const LayerPlacement& start, const std::vector<double>& loads, int floor) {
  BalanceLayout L;
  L.N = int(start.nodes.size());
  if (L.N == 0) return fail("a placement needs at least one node");
  L.words = (L.N + 63) / 64;
  L.E = start.experts;
  for (const auto& node : start.nodes)
    for (int e : node) {
      if (e < 0) return fail("expert id ", e, " is negative");
      L.E = std::max(L.E, e + 1);
    }
  if (loads.size() < size_t(L.E)) return fail(loads.size(), " loads for experts 0..", L.E - 1);
  for (size_t e = 0; e < loads.size(); ++e)
    if (!(loads[e] >= 0)) return fail("expert ", e, " has load ", loads[e], "; loads must be >= 0");
  L.nodes = start.nodes;
  std::vector<int> count(size_t(L.E), 0);
  for (const auto& node : L.nodes)
    for (int e : node) ++count[size_t(e)];
  L.w.assign(size_t(L.E), 0);
  for (int e = 0; e < L.E; ++e)
    if (count[size_t(e)] > 0) L.w[size_t(e)] = loads[size_t(e)] / count[size_t(e)];
  L.recompute();
  L.need.assign(size_t(L.E), 0);
  for (int e = 0; e < L.E; ++e)
    L.need[size_t(e)] = std::min({std::max(floor, 1), L.N, L.replicas[size_t(e)]});
  return L;
}

// ---------- phase 1: re-deal the replicas the family does not pin ----------

BalanceLayout redeal(const BalanceLayout& start, const Family& F) {
  BalanceLayout L = start;
  std::vector<std::pair<double, int>> free_units;  // (-w, e) per expert with units to deal: heaviest first
  std::vector<int> count(size_t(L.E), 0);
  for (int e = 0; e < L.E; ++e) {
    if (L.replicas[size_t(e)] == 0 || F.realizes(e) >= 0) continue;  // realizers keep every replica
    const int f = F.anchor(L.sets[size_t(e)]);
    for (int n = 0; n < L.N; ++n) {
      const int keep = f >= 0 && has(F.set(size_t(f)), n) ? 1 : 0;
      for (int u = keep; u < L.units[size_t(e)][size_t(n)]; ++u) {
        auto& slots = L.nodes[size_t(n)];
        *std::find(slots.begin(), slots.end(), e) = -1;
        ++count[size_t(e)];
      }
    }
    if (count[size_t(e)] > 0) free_units.push_back({-L.w[size_t(e)], e});
  }
  std::sort(free_units.begin(), free_units.end());
  std::vector<int> holes(size_t(L.N), 0);
  std::vector<double> work(size_t(L.N), 0);
  std::vector<std::vector<char>> holds(size_t(L.E), std::vector<char>(size_t(L.N), 0));
  for (int n = 0; n < L.N; ++n)
    for (int e : L.nodes[size_t(n)]) {
      if (e < 0) {
        ++holes[size_t(n)];
      } else {
        work[size_t(n)] += L.w[size_t(e)];
        holds[size_t(e)][size_t(n)] = 1;
      }
    }
  OpenSlots open(std::move(work), std::move(holes));
  // an expert's replicas to the least loaded nodes with room that do not hold it yet, one each
  // (then, if those run out, to the least loaded nodes with room)
  auto place = [&](int e, int n, double w) {
    auto& slots = L.nodes[size_t(n)];
    *std::find(slots.begin(), slots.end(), -1) = e;
    holds[size_t(e)][size_t(n)] = 1;
    open.fill(n, w);
  };
  for (const auto& unit : free_units) {
    const double neg_w = unit.first;  // not a structured binding: clang 14 cannot capture one
    const int e = unit.second;
    size_t left = size_t(count[size_t(e)]);
    for (int n : open.take(left, [&](int m) { return !holds[size_t(e)][size_t(m)]; })) place(e, n, -neg_w), --left;
    while (left > 0) {
      const auto any = open.take(1, [](int) { return true; });
      if (any.empty()) break;  // cannot happen: the free slots are as many as the units
      place(e, any.front(), -neg_w);
      --left;
    }
  }
  L.recompute();
  return L;
}

// ---------- phase 2: local search ----------

class BalanceSearch {
 public:
  BalanceSearch(BalanceLayout& L, Family& F, uint64_t budget)
      : L_(L), F_(F), budget_(budget), in_union_(size_t(L.N), 0), inside_(size_t(L.E)) {
    double sum = 0;
    for (double x : L_.work) sum += x;
    eps_ = 1e-9 * std::max(sum / L_.N, 1e-300);
    for (int e = 0; e < L_.E; ++e) find_inside(e);
  }

  int run() {
    int moves = 0;
    while (evaluations_ < budget_ && step()) ++moves;
    return moves;
  }
  uint64_t evaluations() const { return evaluations_; }

 private:
  // a leaves node `from` for node `to` (a swap) or the nodes of minimal set f for those of g (a
  // block swap); b goes the other way.
  struct Move {
    int a = -1, b = -1;
    int from = -1, to = -1;
    int f = -1, g = -1;
    double max = 0, sq = 0;
  };

  // The nodes a move takes a from, and those it takes a to (paired in order).
  std::pair<const int*, const int*> ends(const Move& m, size_t& count) const {
    if (m.f < 0) {
      count = 1;
      return {&m.from, &m.to};
    }
    count = F_.nodes_of(size_t(m.f)).size();
    return {F_.nodes_of(size_t(m.f)).data(), F_.nodes_of(size_t(m.g)).data()};
  }

  bool better(double max, double sq, double than_max, double than_sq) const {
    return max < than_max - eps_ || (max <= than_max + eps_ && sq < than_sq - eps_);
  }

  // The largest work outside the marked nodes (in_union_).
  double rest_max() const {
    for (int n : order_)
      if (!in_union_[size_t(n)]) return L_.work[size_t(n)];
    return 0;
  }

  // The distinct experts of every node, for this step.
  void list_distinct() {
    distinct_.assign(size_t(L_.N), {});
    for (int n = 0; n < L_.N; ++n)
      for (int e : L_.nodes[size_t(n)])
        if (std::find(distinct_[size_t(n)].begin(), distinct_[size_t(n)].end(), e) == distinct_[size_t(n)].end())
          distinct_[size_t(n)].push_back(e);
  }

  // The node sets of a and b after the move.
  std::pair<Bits, Bits> sets_after(const Move& m) const {
    Bits sa = L_.sets[size_t(m.a)], sb = L_.sets[size_t(m.b)];
    size_t count = 0;
    auto [from, to] = ends(m, count);
    for (size_t i = 0; i < count; ++i) {
      if (L_.units[size_t(m.a)][size_t(from[i])] == 1) drop(sa, from[i]);
      put(sa, to[i]);
      if (L_.units[size_t(m.b)][size_t(to[i])] == 1) drop(sb, to[i]);
      put(sb, from[i]);
    }
    return {sa, sb};
  }

  bool feasible(const Move& m, bool apply) {
    auto [sa, sb] = sets_after(m);
    return F_.keeps(L_, {m.a, m.b}, {sa, sb}, apply);
  }

  // Scores a move (its objective only; feasibility is checked later, best first). d: the work
  // each `from` node sheds and each `to` node takes on; rest: the busiest node outside both.
  void score(Move m, double d, double rest) {
    ++evaluations_;
    double most = rest, sq = sq_;
    size_t count = 0;
    auto [from, to] = ends(m, count);
    for (size_t i = 0; i < count; ++i) {
      const double x = L_.work[size_t(from[i])], y = L_.work[size_t(to[i])];
      sq += (x - d) * (x - d) - x * x + (y + d) * (y + d) - y * y;
      most = std::max({most, x - d, y + d});
    }
    if (!better(most, sq, max_, sq_)) return;
    m.max = most;
    m.sq = sq;
    candidates_.push_back(m);
  }

  // Whether one replica of e may leave node n whatever node it goes to: e keeps a replica there,
  // or its node set without n still contains a minimal set that is realized. (A replica that fails
  // this may still move in rare families, to a node completing another minimal set; the search
  // skips those, and checks every move it takes in full.)
  bool movable(int e, int n) const {
    if (L_.units[size_t(e)][size_t(n)] > 1) return true;
    for (int f : inside_[size_t(e)])
      if (!has(F_.set(size_t(f)), n) && F_.realized(size_t(f)) > 0) return true;
    return false;
  }

  bool contains(int e, int f) const {
    return std::find(inside_[size_t(e)].begin(), inside_[size_t(e)].end(), f) != inside_[size_t(e)].end();
  }
  bool touches(int e, const std::vector<int>& nodes) const {
    for (int n : nodes)
      if (L_.units[size_t(e)][size_t(n)] > 0) return true;
    return false;
  }

  // inside_[e]: the minimal sets inside e's node set.
  void find_inside(int e) {
    inside_[size_t(e)].clear();
    for (size_t f = 0; f < F_.size(); ++f)
      if (subset(F_.set(f), L_.sets[size_t(e)])) inside_[size_t(e)].push_back(int(f));
  }

  // One replica of a on the busiest node for one of a lighter b on one of the lightest nodes.
  void swaps(int top, const std::vector<int>& here) {
    std::vector<int> leaving;
    for (int a : here)
      if (movable(a, top)) leaving.push_back(a);
    if (leaving.empty()) return;
    const size_t lightest = std::min<size_t>(order_.size() - 1, kLightestNodes);
    for (size_t i = order_.size() - lightest; i < order_.size(); ++i) {
      const int n = order_[i];
      in_union_[size_t(top)] = in_union_[size_t(n)] = 1;
      const double rest = rest_max();
      in_union_[size_t(top)] = in_union_[size_t(n)] = 0;
      for (int b : distinct_[size_t(n)]) {
        if (!movable(b, n)) continue;
        for (int a : leaving) {
          const double d = L_.w[size_t(a)] - L_.w[size_t(b)];
          if (b != a && d > eps_) score(Move{a, b, top, n, -1, -1, 0, 0}, d, rest);
        }
      }
    }
  }

  // a's replicas on a minimal set through the busiest node for a lighter b's on another of the
  // same size, disjoint from it, that a does not touch and b does not touch the first.
  void block_swaps(int top, const std::vector<int>& here) {
    auto disjoint = [](const Bits& x, const Bits& y) {
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i] & y[i]) return false;
      return true;
    };
    for (size_t f = 0; f < F_.size(); ++f) {
      const Bits& M = F_.set(f);
      if (!has(M, top)) continue;
      const std::vector<int>& from = F_.nodes_of(f);
      for (size_t g = 0; g < F_.size() && evaluations_ < budget_; ++g) {
        const Bits& M2 = F_.set(g);
        if (g == f || F_.set_size(g) != F_.set_size(f) || !disjoint(M, M2)) continue;
        const std::vector<int>& to = F_.nodes_of(g);
        evaluations_ += from.size();  // the pair's own work counts against the budget too
        for (int n : from) in_union_[size_t(n)] = 1;
        for (int n : to) in_union_[size_t(n)] = 1;
        const double rest = rest_max();
        for (int n : from) in_union_[size_t(n)] = 0;
        for (int n : to) in_union_[size_t(n)] = 0;
        for (int a : here) {
          if (!contains(a, int(f)) || touches(a, to)) continue;
          for (int b : distinct_[size_t(to.front())]) {
            const double d = L_.w[size_t(a)] - L_.w[size_t(b)];
            if (b == a || d <= eps_ || !contains(b, int(g)) || touches(b, from)) continue;
            score(Move{a, b, -1, -1, int(f), int(g), 0, 0}, d, rest);
          }
        }
      }
    }
  }

  void apply(const Move& m) {
    feasible(m, true);  // commits the family's realizer counts
    const double d = L_.w[size_t(m.a)] - L_.w[size_t(m.b)];
    size_t count = 0;
    auto [from, to] = ends(m, count);
    for (size_t i = 0; i < count; ++i) {
      L_.swap_units(m.a, from[i], m.b, to[i]);
      L_.work[size_t(from[i])] -= d;
      L_.work[size_t(to[i])] += d;
    }
    find_inside(m.a);
    find_inside(m.b);
  }

  // Scores every move from the busiest node, then takes the best one that keeps the family.
  bool step() {
    order_.resize(size_t(L_.N));
    for (int n = 0; n < L_.N; ++n) order_[size_t(n)] = n;
    std::sort(order_.begin(), order_.end(), [&](int x, int y) {
      return L_.work[size_t(x)] != L_.work[size_t(y)] ? L_.work[size_t(x)] > L_.work[size_t(y)] : x < y;
    });
    sq_ = 0;
    for (double x : L_.work) sq_ += x * x;
    const int top = order_.front();
    max_ = L_.work[size_t(top)];
    list_distinct();
    const std::vector<int> here = distinct_[size_t(top)];
    candidates_.clear();
    swaps(top, here);
    block_swaps(top, here);
    // the best candidate first; an infeasible one is dropped and the next best tried
    auto first = [](const Move& x, const Move& y) {
      return x.max != y.max ? x.max < y.max : x.sq != y.sq ? x.sq < y.sq : x.a != y.a ? x.a < y.a : x.b < y.b;
    };
    while (!candidates_.empty()) {
      auto best = std::min_element(candidates_.begin(), candidates_.end(), first);
      if (feasible(*best, false)) {
        apply(*best);
        return true;
      }
      *best = candidates_.back();
      candidates_.pop_back();
    }
    return false;
  }

  // Swaps from the busiest node go to this many of the lightest nodes: moving work there is what
  // lowers the maximum, and it bounds a step's work on large layers.
  static constexpr size_t kLightestNodes = 64;

  BalanceLayout& L_;
  Family& F_;
  uint64_t budget_, evaluations_ = 0;
  double eps_ = 0, sq_ = 0, max_ = 0;
  std::vector<int> order_;
  std::vector<std::vector<int>> distinct_;
  std::vector<char> in_union_;
  std::vector<std::vector<int>> inside_;
  std::vector<Move> candidates_;
};

double max_work(const BalanceLayout& L) { return *std::max_element(L.work.begin(), L.work.end()); }

}  // namespace

Result<double> placement_imbalance(const LayerPlacement& layer, const std::vector<double>& loads) {
  auto L = make_layout(layer, loads, 1);
  if (!L) return L.error().with_context("placement imbalance");
  return imbalance_of(L->work);
}

Result<BalanceResult> balance_placement(const LayerPlacement& start, const std::vector<double>& loads,
                                        const BalanceOptions& options) {
  auto made = make_layout(start, loads, options.floor);
  if (!made) return made.error().with_context("balancing a placement");
  BalanceLayout L = std::move(*made);
  BalanceResult r;
  r.before = imbalance_of(L.work);
  Family family(L);
  if (options.redeal) {
    BalanceLayout dealt = redeal(L, family);
    bool dealt_ok = Family(dealt).same_sets(family) && max_work(dealt) < max_work(L);
    for (int e = 0; e < dealt.E && dealt_ok; ++e) dealt_ok = popcount(dealt.sets[size_t(e)]) >= dealt.need[size_t(e)];
    if (dealt_ok) {
      L = std::move(dealt);
      family = Family(L);
    }
  }
  const uint64_t budget = options.max_evaluations
                              ? options.max_evaluations
                              : std::clamp(kBudgetWork / uint64_t(L.N), kMinEvaluations, kMaxEvaluations);
  BalanceSearch search(L, family, budget);
  r.moves = search.run();
  r.evaluations = search.evaluations();
  r.after = imbalance_of(L.work);
  r.layer.experts = std::max(start.experts, L.E);
  r.layer.nodes = L.nodes;
  return r;
}

}  // namespace sal::algo

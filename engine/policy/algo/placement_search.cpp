// placement_search.cpp — see placement_search.h. Three parts: the exact scorer (a superset closure
// over the 2^N failure sets, word-parallel), the search state (replica counts per node and expert,
// node masks, the validity deficit), and the search itself (starts, first-improvement climbing,
// iterated kicks).
#include "policy/algo/placement_search.h"

#include <algorithm>
#include <array>
#include <bit>
#include <numeric>
#include <optional>

#include "core/deadline.h"
#include "policy/algo/rng.h"

namespace sal::algo {
namespace {

// ---------------------------------------------------------------------------------------------
// Exact scoring.

// Word masks for the in-word steps of the closure: bit p is set iff bit i of p is 0.
constexpr std::array<uint64_t, 6> kLowHalf = {0x5555555555555555ULL, 0x3333333333333333ULL,
                                              0x0f0f0f0f0f0f0f0fULL, 0x00ff00ff00ff00ffULL,
                                              0x0000ffff0000ffffULL, 0x00000000ffffffffULL};

// kLevel[j]: the positions p in 0..63 with popcount(p) = j.
constexpr std::array<uint64_t, 7> make_levels() {
  std::array<uint64_t, 7> out{};
  for (int p = 0; p < 64; ++p) out[size_t(std::popcount(unsigned(p)))] |= uint64_t(1) << p;
  return out;
}
constexpr std::array<uint64_t, 7> kLevel = make_levels();

// Bit s of `dead` says whether failure set s (a subset of the N nodes) loses some expert.
class Scorer {
 public:
  explicit Scorer(int nodes)
      : nodes_(nodes), dead_(std::max<size_t>(1, (size_t(1) << nodes) / 64), 0) {}

  // killed[k] for k = 0..N into out[0..N], given the node masks of the scored experts.
  void count(const std::vector<uint32_t>& masks, const std::vector<char>& scored, uint64_t* out) {
    std::fill(dead_.begin(), dead_.end(), 0);
    for (size_t e = 0; e < masks.size(); ++e)
      if (scored[e]) dead_[masks[e] >> 6] |= uint64_t(1) << (masks[e] & 63);
    close_upwards();
    tally(out);
  }

 private:
  // Every superset of a dead set is dead: one pass per node (a zeta transform over subsets).
  void close_upwards() {
    for (int i = 0; i < std::min(nodes_, 6); ++i)
      for (auto& w : dead_) w |= (w & kLowHalf[size_t(i)]) << (1 << i);
    for (int i = 6; i < nodes_; ++i) {
      const size_t stride = size_t(1) << (i - 6);
      for (size_t w = 0; w < dead_.size(); ++w)
        if (w & stride) dead_[w] |= dead_[w ^ stride];
    }
  }

  // Failure set s = 64·w + p has popcount(w) + popcount(p) nodes.
  void tally(uint64_t* out) const {
    std::fill(out, out + nodes_ + 1, 0);
    for (size_t w = 0; w < dead_.size(); ++w) {
      if (!dead_[w]) continue;
      const int base = std::popcount(w);
      for (int j = 0; j <= std::min(nodes_, 6); ++j)
        out[base + j] += uint64_t(std::popcount(dead_[w] & kLevel[size_t(j)]));
    }
  }

  int nodes_;
  std::vector<uint64_t> dead_;
};

Status check_layer(const LayerPlacement& layer) {
  const int n = int(layer.nodes.size());
  if (n == 0) return fail("the placement has no nodes");
  if (n > kMaxSearchNodes)
    return fail("exact failure counts need at most ", kMaxSearchNodes, " nodes, the placement has ", n);
  for (int node = 0; node < n; ++node)
    for (int e : layer.nodes[size_t(node)])
      if (e < 0 || e >= layer.experts)
        return fail("node ", node, " holds expert ", e, ", outside 0..", layer.experts - 1);
  return {};
}

// ---------------------------------------------------------------------------------------------
// Search state. Experts are renumbered 0..E-1 over those with at least one replica.

using Profile = std::vector<uint64_t>;  // [validity deficit, killed[0], ..., killed[N]]

struct State {
  int nodes = 0, experts = 0;
  std::vector<uint32_t> count;  // count[n * experts + e]: replicas of e on node n
  std::vector<uint32_t> mask;   // nodes holding e
  std::vector<int> need;        // distinct nodes e must span (0 when not scored)
  int64_t deficit = 0;          // Σ max(0, need − span): 0 iff valid

  uint32_t& at(int n, int e) { return count[size_t(n) * size_t(experts) + size_t(e)]; }
  uint32_t at(int n, int e) const { return count[size_t(n) * size_t(experts) + size_t(e)]; }
  int short_of(int e) const { return std::max(0, need[size_t(e)] - std::popcount(mask[size_t(e)])); }

  void move(int e, int from, int to) {
    deficit -= short_of(e);
    if (--at(from, e) == 0) mask[size_t(e)] &= ~(uint32_t(1) << from);
    if (at(to, e)++ == 0) mask[size_t(e)] |= uint32_t(1) << to;
    deficit += short_of(e);
  }
};

struct Swap {
  int x, a, y, b;  // a leaves node x for y, b leaves y for x
};

void apply(State& s, const Swap& m) {
  s.move(m.a, m.x, m.y);
  s.move(m.b, m.y, m.x);
}
void undo(State& s, const Swap& m) {
  s.move(m.a, m.y, m.x);
  s.move(m.b, m.x, m.y);
}

// The compact problem: which experts exist, their replica counts, who is scored, slots per node.
struct Problem {
  int nodes = 0;
  std::vector<int> id;         // compact -> original expert id
  std::vector<int> replicas;   // per compact expert
  std::vector<char> scored;    // per compact expert
  std::vector<int> need;       // per compact expert
  std::vector<int> slots;      // per node
};

Problem make_problem(const LayerPlacement& layer, const PlacementSearchOptions& o) {
  Problem p;
  p.nodes = int(layer.nodes.size());
  std::vector<int> replicas(size_t(layer.experts), 0);
  for (const auto& node : layer.nodes) {
    p.slots.push_back(int(node.size()));
    for (int e : node) ++replicas[size_t(e)];
  }
  for (int e = 0; e < layer.experts; ++e) {
    if (replicas[size_t(e)] == 0) continue;  // nothing to move: left out
    const bool ignored = size_t(e) < o.ignore.size() && o.ignore[size_t(e)];
    p.id.push_back(e);
    p.replicas.push_back(replicas[size_t(e)]);
    p.scored.push_back(!ignored);
    p.need.push_back(ignored ? 0 : std::min({o.floor, p.nodes, replicas[size_t(e)]}));
  }
  return p;
}

State state_of(const Problem& p, const std::vector<std::vector<int>>& nodes) {
  State s;
  s.nodes = p.nodes;
  s.experts = int(p.id.size());
  s.count.assign(size_t(s.nodes) * size_t(s.experts), 0);
  s.mask.assign(size_t(s.experts), 0);
  s.need = p.need;
  for (int n = 0; n < s.nodes; ++n)
    for (int e : nodes[size_t(n)]) {
      ++s.at(n, e);
      s.mask[size_t(e)] |= uint32_t(1) << n;
    }
  for (int e = 0; e < s.experts; ++e) s.deficit += s.short_of(e);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Starting layouts, in compact expert ids: nodes[n] lists node n's experts.

using Layout = std::vector<std::vector<int>>;

Layout to_compact(const LayerPlacement& layer, const Problem& p) {
  std::vector<int> compact(size_t(layer.experts), -1);
  for (size_t i = 0; i < p.id.size(); ++i) compact[size_t(p.id[i])] = int(i);
  Layout out(size_t(p.nodes));
  for (int n = 0; n < p.nodes; ++n)
    for (int e : layer.nodes[size_t(n)]) out[size_t(n)].push_back(compact[size_t(e)]);
  return out;
}

// Round robin: expert by expert, replicas dealt to the next node with a free slot (the `spread`
// policy's layout when every node has the same number of slots).
Layout round_robin(const Problem& p) {
  Layout out(size_t(p.nodes));
  int next = 0;
  for (int e = 0; e < int(p.id.size()); ++e)
    for (int k = 0; k < p.replicas[size_t(e)]; ++k) {
      while (int(out[size_t(next)].size()) >= p.slots[size_t(next)]) next = (next + 1) % p.nodes;
      out[size_t(next)].push_back(e);
      next = (next + 1) % p.nodes;
    }
  return out;
}

// One replica of e to the node with a free slot that does not hold e yet, most free slots first
// (then any node with a free slot, most free first; ties by node id).
void put_greedy(Layout& out, std::vector<int>& free, int e) {
  int best = -1;
  long best_score = -1;
  for (int n = 0; n < int(out.size()); ++n) {
    if (free[size_t(n)] == 0) continue;
    const bool holds = std::find(out[size_t(n)].begin(), out[size_t(n)].end(), e) != out[size_t(n)].end();
    const long score = (holds ? 0 : 1'000'000) + free[size_t(n)];
    if (score > best_score) best = n, best_score = score;
  }
  out[size_t(best)].push_back(e);
  --free[size_t(best)];
}

// The t least replicated scored experts in MRO blocks — groups of c (the smallest slot count), each
// group once on every node of a run of consecutive nodes as long as its least replicated member's
// count — and every other replica dealt greedily: scored experts by ascending count, then the
// ignored experts and the members' extra replicas. Empty when the blocks do not fit.
Layout blocks_then_spread(const Problem& p, const std::vector<int>& ascending, size_t t) {
  const int c = *std::min_element(p.slots.begin(), p.slots.end());
  if (c == 0 && t > 0) return {};
  Layout out(size_t(p.nodes));
  std::vector<int> free = p.slots, extra = p.replicas;
  int cursor = 0;
  for (size_t g = 0; g < t; g += size_t(c)) {
    const int size = p.replicas[size_t(ascending[g])];
    if (cursor + size > p.nodes) return {};
    for (size_t i = g; i < std::min(t, g + size_t(c)); ++i) {
      const int e = ascending[i];
      for (int n = cursor; n < cursor + size; ++n) out[size_t(n)].push_back(e), --free[size_t(n)];
      extra[size_t(e)] -= size;
    }
    cursor += size;
  }
  for (size_t i = t; i < ascending.size(); ++i)
    for (int k = 0; k < p.replicas[size_t(ascending[i])]; ++k) put_greedy(out, free, ascending[i]);
  for (size_t i = 0; i < t; ++i)
    for (int k = 0; k < extra[size_t(ascending[i])]; ++k) put_greedy(out, free, ascending[i]);
  for (int e = 0; e < int(p.id.size()); ++e)
    if (!p.scored[size_t(e)])
      for (int k = 0; k < p.replicas[size_t(e)]; ++k) put_greedy(out, free, e);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The search.

constexpr int kSideways = 30;  // equal-score moves a climb may take (1 in 8 offered)
constexpr uint64_t kWander = 10;   // a worse kicked layout is kept once in kWander

class Search {
 public:
  Search(const Problem& p, uint64_t seed) : p_(p), scorer_(p.nodes), rng_(seed) {}

  uint64_t evaluations() const { return evals_; }

  Profile profile(const State& s) {
    if ((++evals_ & 255) == 0 && deadline_passed()) evals_ = kStopped;  // every loop ends; the caller raises
    Profile out(size_t(p_.nodes) + 2);
    out[0] = uint64_t(s.deficit);
    scorer_.count(s.mask, p_.scored, out.data() + 1);
    return out;
  }

  // Iterated local search from `s` until `until` evaluations have been spent in all: kick, climb,
  // keep the result if it is no worse (or, once in kWander, even if it is), remember the best.
  std::pair<State, Profile> iterate(State s, uint64_t until) {
    Profile cur = climb(s, profile(s), until);
    std::pair<State, Profile> best{s, cur};
    while (evals_ < until) {
      State saved = s;
      kick(s);
      Profile next = climb(s, profile(s), until);
      if (compare_failure_counts(next, best.second) < 0) best = {s, next};
      if (compare_failure_counts(next, cur) <= 0 || rng_.below(kWander) == 0) {
        cur = std::move(next);
      } else {
        s = std::move(saved);
      }
    }
    return best;
  }

 private:
  // First improvement over the shuffled swaps that change some scored expert's node set.
  Profile climb(State& s, Profile cur, uint64_t until) {
    int sideways = kSideways;
    for (bool moved = true; moved && evals_ < until;) {
      moved = false;
      auto moves = swaps(s);
      shuffle(moves);
      for (const auto& m : moves) {
        if (evals_ >= until) break;
        apply(s, m);
        Profile next = profile(s);
        const int c = compare_failure_counts(next, cur);
        if (c < 0 || (c == 0 && sideways > 0 && rng_.below(8) == 0)) {
          sideways -= c == 0;
          cur = std::move(next);
          moved = true;
          break;
        }
        undo(s, m);
      }
    }
    return cur;
  }

  bool matters(const State& s, const Swap& m) const {
    auto changes = [&](int e, int from, int to) {
      return p_.scored[size_t(e)] && (s.at(from, e) == 1 || s.at(to, e) == 0);
    };
    return changes(m.a, m.x, m.y) || changes(m.b, m.y, m.x);
  }

  std::vector<std::vector<int>> distinct(const State& s) const {
    std::vector<std::vector<int>> out(size_t(s.nodes));
    for (int n = 0; n < s.nodes; ++n)
      for (int e = 0; e < s.experts; ++e)
        if (s.at(n, e)) out[size_t(n)].push_back(e);
    return out;
  }

  std::vector<Swap> swaps(const State& s) const {
    const auto on = distinct(s);
    std::vector<Swap> out;
    for (int x = 0; x < s.nodes; ++x)
      for (int y = x + 1; y < s.nodes; ++y)
        for (int a : on[size_t(x)])
          for (int b : on[size_t(y)])
            if (a != b && matters(s, {x, a, y, b})) out.push_back({x, a, y, b});
    return out;
  }

  void shuffle(std::vector<Swap>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(rng_.below(i))]);
  }

  // Two to four random swaps, whatever they do to the score.
  void kick(State& s) {
    const auto on = distinct(s);
    const int swaps_to_make = 2 + int(rng_.below(3));
    for (int i = 0; i < swaps_to_make && s.nodes > 1; ++i) {
      const int x = int(rng_.below(uint64_t(s.nodes)));
      const int y = (x + 1 + int(rng_.below(uint64_t(s.nodes - 1)))) % s.nodes;
      if (on[size_t(x)].empty() || on[size_t(y)].empty()) continue;
      const int a = on[size_t(x)][size_t(rng_.below(on[size_t(x)].size()))];
      const int b = on[size_t(y)][size_t(rng_.below(on[size_t(y)].size()))];
      if (a != b && s.at(x, a) && s.at(y, b)) apply(s, {x, a, y, b});
    }
  }

  const Problem& p_;
  Scorer scorer_;
  uint64_t evals_ = 0;
  static constexpr uint64_t kStopped = UINT64_MAX / 2;  // past any `until`
  Rng rng_;
};

// About 5 ms of work on the project's 2-core machine: an evaluation costs ~100 ns of bookkeeping
// plus ~1 ns per word of the closure and the tally, (N + 7)·max(1, 2^N/64) words — 0.4 µs at
// N = 10, 1.5 µs at N = 12, 22 µs at N = 16 (measured).
uint64_t default_budget(const Problem& p) {
  const uint64_t words = std::max<uint64_t>(1, (uint64_t(1) << p.nodes) / 64);
  const uint64_t nanoseconds = 100 + uint64_t(p.nodes + 7) * words;
  return std::clamp<uint64_t>(uint64_t(5'000'000) / nanoseconds, 200, 30'000);
}

struct Candidate {
  std::string name;
  Layout layout;
};

// The given layout, round robin, and the best blocks-then-spread layout over t = 0..E.
std::vector<Candidate> starts(const Problem& p, Layout given, Search& search) {
  std::vector<Candidate> out{{"given", std::move(given)}, {"round-robin", round_robin(p)}};
  std::vector<int> ascending;
  for (int e = 0; e < int(p.id.size()); ++e)
    if (p.scored[size_t(e)]) ascending.push_back(e);
  std::stable_sort(ascending.begin(), ascending.end(),
                   [&](int a, int b) { return p.replicas[size_t(a)] < p.replicas[size_t(b)]; });
  Layout best;
  Profile best_profile;
  for (size_t t = 0; t <= ascending.size(); ++t) {
    Layout l = blocks_then_spread(p, ascending, t);
    if (l.empty()) continue;
    Profile pr = search.profile(state_of(p, l));
    if (best.empty() || compare_failure_counts(pr, best_profile) < 0) best = std::move(l), best_profile = std::move(pr);
  }
  if (!best.empty()) out.push_back({"blocks+spread", std::move(best)});
  return out;
}

LayerPlacement to_layer(const State& s, const Problem& p, int experts) {
  LayerPlacement out{experts, std::vector<std::vector<int>>(size_t(s.nodes))};
  for (int n = 0; n < s.nodes; ++n)
    for (int e = 0; e < s.experts; ++e)
      for (uint32_t k = 0; k < s.at(n, e); ++k) out.nodes[size_t(n)].push_back(p.id[size_t(e)]);
  return out;
}

}  // namespace

Result<FailureCounts> failure_counts(const LayerPlacement& layer, const std::vector<bool>& ignore) {
  SAL_TRY(check_layer(layer));
  const int n = int(layer.nodes.size());
  std::vector<uint32_t> mask(size_t(layer.experts), 0);
  for (int node = 0; node < n; ++node)
    for (int e : layer.nodes[size_t(node)]) mask[size_t(e)] |= uint32_t(1) << node;
  std::vector<char> scored(size_t(layer.experts));
  for (size_t e = 0; e < scored.size(); ++e) scored[e] = !(e < ignore.size() && ignore[e]);
  FailureCounts out(size_t(n) + 1);
  Scorer(n).count(mask, scored, out.data());
  return out;
}

int compare_failure_counts(const FailureCounts& a, const FailureCounts& b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (ia == a.end() || ib == b.end()) return 0;
  return *ia < *ib ? -1 : 1;
}

Result<PlacementSearchResult> search_placement(const LayerPlacement& start, const PlacementSearchOptions& o) {
  SAL_TRY(check_layer(start));
  if (o.floor < 0) return fail("floor must be non-negative, got ", o.floor);
  const Problem p = make_problem(start, o);
  Search search(p, o.seed);
  const uint64_t budget = o.max_evaluations ? o.max_evaluations : default_budget(p);

  const State given = state_of(p, to_compact(start, p));
  const Profile given_profile = search.profile(given);
  auto candidates = starts(p, to_compact(start, p), search);

  std::optional<std::pair<State, Profile>> best;
  std::string best_name;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const uint64_t until = search.evaluations() + budget / candidates.size();
    auto found = search.iterate(state_of(p, candidates[i].layout), until);
    if (!best || compare_failure_counts(found.second, best->second) < 0)
      best = std::move(found), best_name = candidates[i].name;
  }

  PlacementSearchResult r;
  r.layer = to_layer(best->first, p, start.experts);
  r.killed.assign(best->second.begin() + 1, best->second.end());
  r.valid = best->second[0] == 0;
  r.improved = compare_failure_counts(best->second, given_profile) < 0;
  r.start = best_name;
  r.evaluations = search.evaluations();
  return r;
}

}  // namespace sal::algo

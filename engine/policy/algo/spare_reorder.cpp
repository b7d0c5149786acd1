// spare_reorder.cpp — SPARe's reordering controller (see spare.h).
//
// The min-cost flow starts from the assignment the current stacks already give: every type found in
// some survivor's first d rounds is assigned (cost 0) to one such survivor, which never exceeds a
// group's d slots because its first d rounds hold d distinct types. That assignment is a min-cost
// flow for its value, so successive shortest paths may continue from it: the network below is its
// residual graph, and only the uncovered types are routed — a handful per failure, not all N.
#include "policy/algo/spare.h"

#include <algorithm>
#include <climits>
#include <string>

#include "policy/algo/flow.h"
#include "policy/algo/matching.h"

namespace sal::algo {
namespace {

constexpr int kNoGroup = -1;
constexpr int kNever = INT_MAX;  // round of a type no survivor hosts

struct Host {
  int group;
  int round;
};

struct Exit {
  int edge;   // flow edge type -> group
  int group;
};

// What the survivors hold: hosts of every type and the earliest round any survivor computes it in.
struct Survey {
  std::vector<int> alive_groups;
  std::vector<int> slot_base;             // group -> its alive index, kNoGroup if dead
  std::vector<std::vector<Host>> hosts;   // type -> surviving hosts
  std::vector<int> first_round;           // type -> earliest round among them, kNever if none
};

Status check_state(const ShardStacks& s) {
  if (s.shard_types < 1) return fail("need at least one shard type, got ", s.shard_types);
  if (s.alive.size() != s.stacks.size())
    return fail(s.stacks.size(), " stacks but ", s.alive.size(), " alive flags");
  std::vector<size_t> seen_in(size_t(s.shard_types), SIZE_MAX);
  for (size_t g = 0; g < s.stacks.size(); ++g)
    for (int t : s.stacks[g]) {
      if (t < 0 || t >= s.shard_types)
        return fail("group ", g, ": shard type ", t, " outside 0..", s.shard_types - 1);
      if (seen_in[t] == g) return fail("group ", g, ": shard type ", t, " twice in one stack");
      seen_in[t] = g;
    }
  return ok_status();
}

Survey survey(const ShardStacks& s) {
  Survey v;
  v.slot_base.assign(s.stacks.size(), kNoGroup);
  v.hosts.resize(size_t(s.shard_types));
  v.first_round.assign(size_t(s.shard_types), kNever);
  for (size_t g = 0; g < s.stacks.size(); ++g) {
    if (!s.alive[g]) continue;
    v.slot_base[g] = int(v.alive_groups.size());
    v.alive_groups.push_back(int(g));
    for (size_t round = 0; round < s.stacks[g].size(); ++round) {
      const int t = s.stacks[g][round];
      v.hosts[t].push_back({int(g), int(round)});
      v.first_round[t] = std::min(v.first_round[t], int(round));
    }
  }
  return v;
}

std::vector<int> lost_types(const Survey& v) {
  std::vector<int> lost;
  for (size_t t = 0; t < v.hosts.size(); ++t)
    if (v.hosts[t].empty()) lost.push_back(int(t));
  return lost;
}

// HK-free: can every type get its own (host, round < depth) slot?
bool feasible(const Survey& v, int depth) {
  std::vector<std::vector<int>> adj(v.hosts.size());
  for (size_t t = 0; t < v.hosts.size(); ++t)
    for (const Host& h : v.hosts[t])
      for (int round = 0; round < depth; ++round)
        adj[t].push_back(v.slot_base[h.group] * depth + round);
  const int slots = int(v.alive_groups.size()) * depth;
  return hopcroft_karp(int(adj.size()), slots, adj).size == int(adj.size());
}

// The survivor computing t earliest in the current stacks.
int earliest_host(const Survey& v, int t) {
  for (const Host& h : v.hosts[t])
    if (h.round == v.first_round[t]) return h.group;
  return kNoGroup;
}

ReorderResult keep(const ShardStacks& s, const Survey& v, int depth, int checks) {
  ReorderResult r;
  r.outcome = ReorderOutcome::kept;
  r.depth = depth;
  r.stacks = s.stacks;
  r.feasibility_checks = checks;
  for (int t = 0; t < s.shard_types; ++t) r.provider.push_back(earliest_host(v, t));
  return r;
}

struct Assignment {
  std::vector<int> provider;  // type -> group
  int moves = 0;
};

// Min-cost flow over the residual graph of the current cover (see the top of this file).
class PromotionFlow {
 public:
  PromotionFlow(const Survey& v, int depth)
      : v_(v), depth_(depth), types_(int(v.hosts.size())),
        flow_(2 + types_ + int(v.alive_groups.size())),
        owner_(size_t(types_), kNoGroup), exits_(size_t(types_)) {}

  Result<Assignment> solve() {
    const int uncovered = build();
    auto sent = flow_.solve(kSource, kSink, uncovered);
    if (!sent.ok()) return sent.error();
    if (sent->flow < uncovered)
      return fail("min-cost flow covered ", sent->flow, " of ", uncovered,
                  " uncovered shard types");
    return Assignment{assignment(), int(sent->cost)};
  }

 private:
  static constexpr int kSource = 0;
  static constexpr int kSink = 1;

  // The residual network: covered types hang from their owner, uncovered ones from the source,
  // every type has an edge to each other host, hosts drain their free rounds into the sink.
  // Returns the number of uncovered types (the flow to send).
  int build() {
    std::vector<int> load(v_.alive_groups.size(), 0);
    int uncovered = 0;
    for (int t = 0; t < types_; ++t) {
      if (v_.first_round[t] < depth_) {
        owner_[t] = earliest_host(v_, t);
        ++load[v_.slot_base[owner_[t]]];
        add(group_node(owner_[t]), type_node(t), 1);
      } else {
        ++uncovered;
        add(kSource, type_node(t), 1);
      }
      add_exits(t);
    }
    for (size_t i = 0; i < load.size(); ++i)
      if (load[i] < depth_) add(int(2 + types_ + i), kSink, depth_ - load[i]);
    return uncovered;
  }

  int type_node(int t) const { return 2 + t; }
  int group_node(int g) const { return 2 + types_ + v_.slot_base[g]; }

  void add(int from, int to, int64_t capacity, int64_t cost = 0) {
    (void)flow_.add_edge(from, to, capacity, cost).value();
  }

  // t may move to any other host; promoting it from round ≥ depth costs one move.
  void add_exits(int t) {
    for (const Host& h : v_.hosts[t]) {
      if (h.group == owner_[t]) continue;
      const int id = flow_.edges();
      add(type_node(t), group_node(h.group), 1, h.round < depth_ ? 0 : 1);
      exits_[t].push_back({id, h.group});
    }
  }

  std::vector<int> assignment() const {
    std::vector<int> group = owner_;
    for (int t = 0; t < types_; ++t)
      for (const Exit& e : exits_[t])
        if (flow_.flow_on(e.edge) > 0) group[t] = e.group;
    return group;
  }

  const Survey& v_;
  int depth_;
  int types_;
  MinCostFlow flow_;
  std::vector<int> owner_;               // type -> group covering it now (kNoGroup if none)
  std::vector<std::vector<Exit>> exits_; // type -> its edges to other hosts
};

// Swaps each promoted type into a round < depth held by a type the group is not assigned.
void promote_in_stack(std::vector<int>& stack, const std::vector<char>& assigned, int depth) {
  std::vector<int> victims;
  for (int p = std::min(depth, int(stack.size())) - 1; p >= 0; --p)
    if (!assigned[stack[p]]) victims.push_back(p);
  size_t next = 0;
  for (size_t p = size_t(depth); p < stack.size(); ++p)
    if (assigned[stack[p]]) std::swap(stack[p], stack[victims[next++]]);
}

ReorderResult rebuild(const ShardStacks& s, const std::vector<int>& provider, int depth) {
  ReorderResult r;
  r.outcome = ReorderOutcome::reordered;
  r.depth = depth;
  r.stacks = s.stacks;
  r.provider = provider;
  std::vector<char> assigned(size_t(s.shard_types), 0);
  for (size_t g = 0; g < s.stacks.size(); ++g) {
    if (!s.alive[g]) continue;
    for (int t : s.stacks[g]) assigned[t] = provider[t] == int(g);
    promote_in_stack(r.stacks[g], assigned, depth);
  }
  return r;
}

Result<ReorderResult> reorder_at(const ShardStacks& s, const Survey& v, int depth, int checks) {
  auto a = PromotionFlow(v, depth).solve();
  if (!a.ok()) return a.error().with_context("reordering at depth " + std::to_string(depth));
  ReorderResult r = rebuild(s, a->provider, depth);
  r.moves = a->moves;
  r.feasibility_checks = checks;
  return r;
}

}  // namespace

ShardStacks initial_stacks(const ShardLayout& layout) {
  return {layout.groups, layout.hosted, std::vector<bool>(layout.hosted.size(), true)};
}

Result<bool> depth_feasible(const ShardStacks& state, int depth) {
  SAL_TRY(check_state(state));
  if (depth < 1) return fail("depth must be at least 1, got ", depth);
  const Survey v = survey(state);
  if (!lost_types(v).empty()) return false;
  return feasible(v, depth);
}

Result<ReorderResult> reorder(const ShardStacks& state) {
  SAL_TRY(check_state(state));
  const Survey v = survey(state);
  if (auto lost = lost_types(v); !lost.empty()) {
    ReorderResult r;
    r.outcome = ReorderOutcome::wiped_out;
    r.stacks = state.stacks;
    r.provider.assign(size_t(state.shard_types), kNoGroup);
    r.lost = std::move(lost);
    return r;
  }
  const int survivors = int(v.alive_groups.size());
  const int bound = (state.shard_types + survivors - 1) / survivors;
  const int fixed = *std::max_element(v.first_round.begin(), v.first_round.end()) + 1;
  int checks = 0;
  for (int depth = bound; depth < fixed; ++depth) {
    ++checks;
    if (feasible(v, depth)) return reorder_at(state, v, depth, checks);
  }
  return keep(state, v, fixed, checks);
}

}  // namespace sal::algo

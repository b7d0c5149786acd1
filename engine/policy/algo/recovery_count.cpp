// recovery_count.cpp — see recovery_count.h.
//
// Enumeration and sampling share one structure: the critical nodes renumbered 0..u-1, each with the
// critical sets it belongs to, and per set the number of its nodes not yet failed. A set whose
// count reaches zero has failed completely, and so has the layer.
#include "policy/algo/recovery_count.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "core/deadline.h"
#include "policy/algo/rng.h"

namespace sal::algo::detail {
namespace {

// Coefficients of Σ_{j<s} C(s, j) x^j: every way to lose fewer than all s nodes of a block.
std::vector<long double> block_polynomial(int s) {
  std::vector<long double> q(static_cast<size_t>(s));
  for (int j = 0; j < s; ++j) q[j] = binomial(s, j);
  return q;
}

// a · b truncated to degree max_k.
std::vector<long double> multiply(const std::vector<long double>& a,
                                  const std::vector<long double>& b, int max_k) {
  const size_t degree = std::min(a.size() + b.size() - 2, size_t(max_k));
  std::vector<long double> c(degree + 1, 0.0L);
  for (size_t i = 0; i < a.size() && i <= degree; ++i)
    for (size_t j = 0; j < b.size() && i + j <= degree; ++j) c[i + j] += a[i] * b[j];
  return c;
}

// C(m, 0..max_k).
std::vector<long double> binomial_row(int m, int max_k) {
  std::vector<long double> row(size_t(max_k) + 1, 0.0L);
  row[0] = 1;
  for (int i = 0; i < max_k && i < m; ++i) row[i + 1] = row[i] * (m - i) / (i + 1);
  return row;
}

// The critical nodes renumbered, and which critical sets each belongs to.
class CriticalIndex {
 public:
  CriticalIndex(int nodes, const std::vector<NodeSet>& critical) : local_(size_t(nodes), -1) {
    for (size_t s = 0; s < critical.size(); ++s) {
      for (int n : critical[s]) {
        if (local_[n] < 0) {
          local_[n] = int(sets_of_.size());
          sets_of_.emplace_back();
        }
        sets_of_[local_[n]].push_back(int(s));
      }
      alive_.push_back(int(critical[s].size()));
    }
  }

  int size() const { return int(sets_of_.size()); }
  int local(int node) const { return local_[node]; }

  // Fails local node x; false when that completes some critical set.
  bool fail_node(int x) {
    bool ok = true;
    for (int s : sets_of_[x])
      if (--alive_[s] == 0) ok = false;
    return ok;
  }
  void restore_node(int x) {
    for (int s : sets_of_[x]) ++alive_[s];
  }

 private:
  std::vector<int> local_;                 // node -> local index, -1 if not critical
  std::vector<std::vector<int>> sets_of_;  // local node -> critical sets containing it
  std::vector<int> alive_;                 // per critical set: nodes not failed
};

class Enumerator {
 public:
  Enumerator(CriticalIndex& index, int k) : index_(index), k_(k), good_(size_t(k) + 1, 0) {}

  // Counts subsets of local nodes >= start that extend the current `chosen` nodes safely.
  void visit(int start, int chosen) {
    if (stopped_ || (deadline_passed_every(polls_) && (stopped_ = true))) return;  // the caller raises
    ++visited_;
    ++good_[chosen];
    if (chosen == k_) return;
    for (int x = start; x < index_.size(); ++x) {
      if (index_.fail_node(x)) visit(x + 1, chosen + 1);
      index_.restore_node(x);
    }
  }

  const std::vector<uint64_t>& good() const { return good_; }
  uint64_t visited() const { return visited_; }

 private:
  CriticalIndex& index_;
  int k_;
  std::vector<uint64_t> good_;  // good_[j]: safe j-subsets of the critical nodes
  uint64_t visited_ = 0;
  uint64_t polls_ = 0;
  bool stopped_ = false;
};

}  // namespace

long double binomial(int n, int k) {
  if (k < 0 || n < 0 || k > n) return 0.0L;
  k = std::min(k, n - k);
  long double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

std::vector<long double> closed_form_survival(int nodes, const std::vector<NodeSet>& blocks,
                                              int max_k) {
  std::vector<long double> poly{1.0L};
  int covered = 0;
  for (const auto& b : blocks) {
    covered += int(b.size());
    poly = multiply(poly, block_polynomial(int(b.size())), max_k);
  }
  const auto free_row = binomial_row(nodes - covered, max_k);
  std::vector<long double> p(size_t(max_k) + 1, 0.0L);
  for (int k = 0; k <= max_k && k <= nodes; ++k) {
    long double survivors = 0;
    for (int j = 0; j <= k && j < int(poly.size()); ++j) survivors += poly[j] * free_row[k - j];
    p[k] = survivors / binomial(nodes, k);
  }
  return p;
}

uint64_t enumeration_work(int union_size, int k) {
  long double total = 0;
  for (int j = 0; j <= k && j <= union_size; ++j) total += binomial(union_size, j);
  return total >= (long double)UINT64_MAX ? UINT64_MAX : uint64_t(total);
}

namespace {

// Triangles in the graph whose edges are `pairs` (each a critical pair of node ids).
long double triangles(int nodes, const std::vector<const NodeSet*>& pairs) {
  std::vector<std::vector<int>> higher(static_cast<size_t>(nodes));  // neighbours with a larger id
  for (const NodeSet* p : pairs) higher[size_t((*p)[0])].push_back((*p)[1]);
  std::vector<char> mark(static_cast<size_t>(nodes), 0);
  long double count = 0;
  for (int u = 0; u < nodes; ++u) {
    for (int v : higher[size_t(u)]) mark[size_t(v)] = 1;
    for (int v : higher[size_t(u)])
      for (int w : higher[size_t(v)]) count += mark[size_t(w)];
    for (int v : higher[size_t(u)]) mark[size_t(v)] = 0;
  }
  return count;
}

// Σ_v C(deg v, 2) over the graph of critical pairs: the paths of two pairs through a middle node.
long double pair_paths(int nodes, const std::vector<const NodeSet*>& pairs) {
  std::vector<long double> degree(static_cast<size_t>(nodes), 0);
  for (const NodeSet* p : pairs) ++degree[size_t((*p)[0])], ++degree[size_t((*p)[1])];
  long double paths = 0;
  for (long double d : degree) paths += d * (d - 1) / 2;
  return paths;
}

}  // namespace

long double small_survival(int nodes, const std::vector<NodeSet>& critical, int k) {
  long double singles = 0, triples = 0;
  std::vector<const NodeSet*> pairs;
  for (const auto& s : critical) {
    if (s.size() == 1) ++singles;
    if (s.size() == 2) pairs.push_back(&s);
    if (s.size() == 3) ++triples;
  }
  const int rest = nodes - int(singles);  // nodes that are no critical singleton
  long double killed = binomial(nodes, k) - binomial(rest, k);  // the subsets holding a singleton
  if (k == 2) killed += (long double)pairs.size();
  if (k == 3)
    killed += (long double)pairs.size() * (rest - 2) - pair_paths(nodes, pairs) + triangles(nodes, pairs) + triples;
  return 1 - killed / binomial(nodes, k);
}

Counted enumerate_survival(int nodes, const std::vector<NodeSet>& critical, int k) {
  CriticalIndex index(nodes, critical);
  Enumerator e(index, k);
  e.visit(0, 0);
  const int outside = nodes - index.size();
  long double survivors = 0;
  for (int j = 0; j <= k; ++j) survivors += (long double)e.good()[j] * binomial(outside, k - j);
  return {survivors / binomial(nodes, k), e.visited()};
}

Sampled sample_survival(int nodes, const std::vector<NodeSet>& critical, int k, uint64_t samples,
                        uint64_t seed) {
  CriticalIndex index(nodes, critical);
  Rng rng(seed);
  std::vector<int> order(static_cast<size_t>(nodes));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int> failed;
  Sampled out{0, samples};
  uint64_t polls = 0;
  for (uint64_t i = 0; i < samples; ++i) {
    if (deadline_passed_every(polls)) break;  // the caller raises its budget's error
    bool ok = true;
    failed.clear();
    for (int j = 0; j < k; ++j) {  // partial Fisher–Yates: order[0..k) is a uniform k-subset
      std::swap(order[j], order[j + rng.below(uint64_t(nodes - j))]);
      const int x = index.local(order[j]);
      if (x < 0) continue;
      failed.push_back(x);
      ok = index.fail_node(x) && ok;
    }
    for (int x : failed) index.restore_node(x);
    out.survived += ok;
  }
  return out;
}

}  // namespace sal::algo::detail

// matching.cpp — see matching.h. The depth-first search is iterative (an explicit path stack), so
// augmenting paths as long as the graph cannot overflow the call stack.
#include "policy/algo/matching.h"

#include <limits>
#include <stdexcept>

#include "core/deadline.h"

namespace sal::algo {
namespace {

constexpr int kFar = std::numeric_limits<int>::max();  // layer of a vertex the BFS did not reach

class HopcroftKarp {
 public:
  HopcroftKarp(const std::vector<std::vector<int>>& adj, MatchingResult& m)
      : adj_(adj), m_(m), layer_(adj.size()), next_edge_(adj.size()) {}

  void run() {
    while (build_layers()) {
      if (deadline_passed()) return;  // the caller raises its budget's error, not this partial matching
      for (size_t u = 0; u < adj_.size(); ++u) next_edge_[u] = 0;
      for (size_t u = 0; u < adj_.size(); ++u)
        if (m_.left_to_right[u] == kUnmatched && augment(int(u))) ++m_.size;
    }
  }

 private:
  // Layers the graph from every free left vertex; true when some free right vertex is reachable.
  // `free_layer_` becomes the length of the shortest augmenting paths (in left vertices).
  bool build_layers() {
    queue_.clear();
    for (size_t u = 0; u < adj_.size(); ++u) {
      layer_[u] = m_.left_to_right[u] == kUnmatched ? 0 : kFar;
      if (layer_[u] == 0) queue_.push_back(int(u));
    }
    free_layer_ = kFar;
    for (size_t head = 0; head < queue_.size(); ++head) {
      const int u = queue_[head];
      if (layer_[u] >= free_layer_) continue;
      for (int v : adj_[u]) {
        const int w = m_.right_to_left[v];
        if (w == kUnmatched) {
          if (free_layer_ == kFar) free_layer_ = layer_[u] + 1;
        } else if (layer_[w] == kFar) {
          layer_[w] = layer_[u] + 1;
          queue_.push_back(w);
        }
      }
    }
    return free_layer_ != kFar;
  }

  // Looks for a shortest augmenting path from the free left vertex `root` along the layers and
  // flips it. Vertices proven to lead nowhere leave the layering for the rest of the phase.
  bool augment(int root) {
    path_.assign(1, root);
    while (!path_.empty()) {
      const int u = path_.back();
      if (next_edge_[u] == adj_[u].size()) {
        layer_[u] = kFar;
        path_.pop_back();
        continue;
      }
      const int v = adj_[u][next_edge_[u]++];
      const int w = m_.right_to_left[v];
      if (w == kUnmatched) {
        if (layer_[u] + 1 != free_layer_) continue;
        flip_path();
        return true;
      }
      if (layer_[w] == layer_[u] + 1) path_.push_back(w);
    }
    return false;
  }

  // Each left vertex on the path takes the right vertex it last stepped through.
  void flip_path() {
    for (int u : path_) {
      const int v = adj_[u][next_edge_[u] - 1];
      m_.left_to_right[u] = v;
      m_.right_to_left[v] = u;
    }
  }

  const std::vector<std::vector<int>>& adj_;
  MatchingResult& m_;
  std::vector<int> layer_;
  std::vector<size_t> next_edge_;
  std::vector<int> queue_;
  std::vector<int> path_;
  int free_layer_ = kFar;
};

MatchingResult empty_matching(int n_left, int n_right) {
  MatchingResult m;
  m.left_to_right.assign(size_t(n_left), kUnmatched);
  m.right_to_left.assign(size_t(n_right), kUnmatched);
  return m;
}

bool has_edge(const std::vector<int>& row, int v) {
  for (int x : row)
    if (x == v) return true;
  return false;
}

// Copies `start` into `m` after checking it is a matching of the graph.
Status seed_matching(const std::vector<std::vector<int>>& adj, const std::vector<int>& start,
                     MatchingResult& m) {
  if (start.size() != adj.size())
    return fail("starting matching has ", start.size(), " entries for ", adj.size(),
                " left vertices");
  for (size_t u = 0; u < start.size(); ++u) {
    const int v = start[u];
    if (v == kUnmatched) continue;
    if (v < 0 || size_t(v) >= m.right_to_left.size() || !has_edge(adj[u], v))
      return fail("starting matching pairs left ", u, " with ", v, ", which is not its neighbour");
    if (m.right_to_left[v] != kUnmatched)
      return fail("starting matching gives right vertex ", v, " two partners");
    m.left_to_right[u] = v;
    m.right_to_left[v] = int(u);
    ++m.size;
  }
  return ok_status();
}

}  // namespace

Status check_bipartite(int n_left, int n_right, const std::vector<std::vector<int>>& adj) {
  if (n_left < 0 || n_right < 0) return fail("negative vertex count");
  if (adj.size() != size_t(n_left))
    return fail("adjacency has ", adj.size(), " lists for ", n_left, " left vertices");
  for (size_t u = 0; u < adj.size(); ++u)
    for (int v : adj[u])
      if (v < 0 || v >= n_right)
        return fail("left vertex ", u, " has neighbour ", v, " outside 0..", n_right - 1);
  return ok_status();
}

MatchingResult hopcroft_karp(int n_left, int n_right, const std::vector<std::vector<int>>& adj) {
  if (auto s = check_bipartite(n_left, n_right, adj); !s.ok())
    throw std::invalid_argument("hopcroft_karp: " + s.error().message());
  MatchingResult m = empty_matching(n_left, n_right);
  HopcroftKarp(adj, m).run();
  return m;
}

Result<MatchingResult> hopcroft_karp(int n_left, int n_right,
                                     const std::vector<std::vector<int>>& adj,
                                     const std::vector<int>& start) {
  SAL_TRY(check_bipartite(n_left, n_right, adj));
  MatchingResult m = empty_matching(n_left, n_right);
  SAL_TRY(seed_matching(adj, start, m));
  HopcroftKarp(adj, m).run();
  return m;
}

}  // namespace sal::algo

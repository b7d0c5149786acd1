// matching.h — maximum matching in a bipartite graph by Hopcroft–Karp ("An n^{5/2} algorithm for
// maximum matchings in bipartite graphs", 1973): phases of a breadth-first layering from the free
// left vertices, then vertex-disjoint shortest augmenting paths found depth-first along the layers.
// O(E·√V). Used by SPARe's reordering controller (can every shard type be computed within d
// rounds?) and by policies directly.
//
// The graph is given as adjacency lists of the left vertices: adj[u] = the right vertices u may be
// matched to. Vertices are numbered 0..n_left-1 and 0..n_right-1.
#pragma once

#include <vector>

#include "core/result.h"

namespace sal::algo {

// Marks a vertex with no partner in MatchingResult.
constexpr int kUnmatched = -1;

struct MatchingResult {
  int size = 0;                    // number of matched pairs
  std::vector<int> left_to_right;  // partner of each left vertex, or kUnmatched
  std::vector<int> right_to_left;  // partner of each right vertex, or kUnmatched
};

// Checks that adj has n_left lists whose entries lie in [0, n_right). Call it on untrusted input:
// hopcroft_karp treats a malformed graph as a programming error.
Status check_bipartite(int n_left, int n_right, const std::vector<std::vector<int>>& adj);

// A maximum matching. Deterministic: the same graph gives the same matching. Throws
// std::invalid_argument if the graph fails check_bipartite.
MatchingResult hopcroft_karp(int n_left, int n_right, const std::vector<std::vector<int>>& adj);

// The same, starting from the partial matching `start` (start[u] = right partner or kUnmatched):
// cheaper when most of a previous matching still holds. Errors when `start` is not a matching of
// this graph (a pair that is not an edge, or a right vertex used twice) or the graph is malformed.
Result<MatchingResult> hopcroft_karp(int n_left, int n_right,
                                     const std::vector<std::vector<int>>& adj,
                                     const std::vector<int>& start);

}  // namespace sal::algo

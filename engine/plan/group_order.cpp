// group_order.cpp — see group_order.h.
#include "plan/group_order.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace sal::plan {
namespace {

// At each position of `order`, the intact group (its index in `intact`) whose workers start there,
// in their order; -1 where none does.
std::vector<int> intact_starts(const std::vector<uint32_t>& order, const std::vector<IntactGroup>& intact) {
  std::vector<int> at(order.size(), -1);
  for (size_t i = 0; i < intact.size(); ++i) {
    const auto& w = intact[i].workers;
    if (w.empty()) continue;
    auto it = std::find(order.begin(), order.end(), w[0]);
    size_t pos = size_t(it - order.begin());
    if (it != order.end() && pos + w.size() <= order.size() && std::equal(w.begin(), w.end(), it)) at[pos] = int(i);
  }
  return at;
}

// The intact group kept when a group of `size` starts at `pos` (intact_starts' `starts`); -1 if none.
int kept_at(const std::vector<int>& starts, const std::vector<IntactGroup>& intact, size_t pos, uint32_t size) {
  if (pos >= starts.size() || starts[pos] < 0) return -1;
  return intact[size_t(starts[pos])].workers.size() == size ? starts[pos] : -1;
}

// The best arrangement of groups by size: at each position, which size goes next. Sizes are few
// (an even split differs by one), so the state — the position and how many groups of each size
// are left — is small.
class Search {
 public:
  Search(std::vector<uint32_t> classes, const std::vector<int>& starts, const std::vector<IntactGroup>& intact)
      : classes_(std::move(classes)), starts_(starts), intact_(intact) {}

  int kept_at(size_t pos, uint32_t size) const { return plan::kept_at(starts_, intact_, pos, size); }

  uint32_t best(size_t pos, std::vector<uint32_t>& left) {
    auto key = std::make_pair(pos, left);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    uint32_t b = 0;
    for (size_t d = 0; d < classes_.size(); ++d) {
      if (left[d] == 0) continue;
      --left[d];
      b = std::max(b, uint32_t(kept_at(pos, classes_[d]) >= 0) + best(pos + classes_[d], left));
      ++left[d];
    }
    memo_[key] = b;
    return b;
  }

  // The sizes in the best order, with the intact group each keeps (-1: none).
  std::vector<std::pair<uint32_t, int>> blocks(std::vector<uint32_t> left) {
    std::vector<std::pair<uint32_t, int>> out;
    size_t pos = 0;
    for (uint32_t want = best(pos, left); std::any_of(left.begin(), left.end(), [](uint32_t n) { return n > 0; });) {
      const size_t placed = out.size();
      for (size_t d = 0; d < classes_.size(); ++d) {
        if (left[d] == 0) continue;
        int kept = kept_at(pos, classes_[d]);
        --left[d];
        uint32_t gets = uint32_t(kept >= 0) + best(pos + classes_[d], left);
        if (gets == want) {
          out.push_back({classes_[d], kept});
          pos += classes_[d];
          want -= uint32_t(kept >= 0);
          break;
        }
        ++left[d];
      }
      if (out.size() == placed) break;  // (cannot happen: best() found this much)
    }
    return out;
  }

 private:
  std::vector<uint32_t> classes_;
  const std::vector<int>& starts_;
  const std::vector<IntactGroup>& intact_;
  std::map<std::pair<size_t, std::vector<uint32_t>>, uint32_t> memo_;
};

// The group indices for `blocks` (in position order): an intact group keeps its own index where
// that group has its size, the others take the lowest free index of their size.
std::vector<uint32_t> indices_for(const std::vector<uint32_t>& sizes, const std::vector<std::pair<uint32_t, int>>& blocks,
                                  const std::vector<IntactGroup>& intact) {
  std::vector<int64_t> chosen(blocks.size(), -1);
  std::vector<bool> used(sizes.size(), false);
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (blocks[b].second < 0) continue;
    uint32_t own = intact[size_t(blocks[b].second)].index;
    if (own < sizes.size() && sizes[own] == blocks[b].first && !used[own]) {
      chosen[b] = own;
      used[own] = true;
    }
  }
  for (size_t b = 0; b < blocks.size(); ++b)
    for (uint32_t g = 0; g < sizes.size() && chosen[b] < 0; ++g)
      if (!used[g] && sizes[g] == blocks[b].first) {
        chosen[b] = g;
        used[g] = true;
      }
  return std::vector<uint32_t>(chosen.begin(), chosen.end());
}

}  // namespace

uint32_t groups_kept(const std::vector<uint32_t>& sizes, const std::vector<uint32_t>& order,
                     const std::vector<IntactGroup>& intact) {
  const std::vector<int> starts = intact_starts(order, intact);
  uint32_t kept = 0;
  size_t pos = 0;
  for (uint32_t n : sizes) {
    kept += n > 0 && kept_at(starts, intact, pos, n) >= 0;
    pos += n;
  }
  return kept;
}

std::vector<uint32_t> order_groups(const std::vector<uint32_t>& sizes, const std::vector<uint32_t>& order,
                                   const std::vector<IntactGroup>& intact) {
  std::vector<uint32_t> identity(sizes.size());
  std::iota(identity.begin(), identity.end(), 0u);
  if (std::accumulate(sizes.begin(), sizes.end(), uint64_t(0)) != order.size()) return identity;
  std::vector<uint32_t> classes, left;
  for (uint32_t n : sizes) {
    if (n == 0) continue;
    auto it = std::find(classes.begin(), classes.end(), n);
    if (it == classes.end()) {
      classes.push_back(n);
      left.push_back(1);
    } else {
      ++left[size_t(it - classes.begin())];
    }
  }
  const std::vector<int> starts = intact_starts(order, intact);
  Search search(classes, starts, intact);
  if (search.best(0, left) <= groups_kept(sizes, order, intact)) return identity;
  auto chosen = indices_for(sizes, search.blocks(left), intact);
  std::vector<uint32_t> perm = identity;  // groups that are down keep their indices
  size_t next = 0;
  for (uint32_t k = 0; k < sizes.size(); ++k)
    if (sizes[k] > 0) perm[k] = chosen[next++];
  return perm;
}

Result<Plan> permute_groups(const Plan& p, const std::vector<uint32_t>& perm) {
  const uint32_t G = uint32_t(p.groups.size());
  std::vector<uint32_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t k = 0; k < sorted.size(); ++k)
    if (sorted.size() != G || sorted[k] != k) return fail("a reordering of ", G, " groups must name each group once");
  Plan q = p;
  std::vector<uint32_t> positions;  // the arranged plan's positions, as positions of p
  for (uint32_t k = 0; k < G; ++k) {
    q.groups[k] = p.groups[perm[k]];
    GroupSpan s = group_span(p, perm[k]);
    for (uint32_t i = s.first; i < s.first + s.count; ++i) positions.push_back(i);
  }
  if (positions.size() != p.nodes) return fail("the plan's groups cover ", positions.size(), " of its ", p.nodes, " positions");
  auto reorder = [&](auto& into, const auto& from) {
    if (from.size() != positions.size()) return;
    for (size_t i = 0; i < positions.size(); ++i) into[i] = from[positions[i]];
  };
  for (size_t l = 0; l < p.layers.size(); ++l) reorder(q.layers[l].placement, p.layers[l].placement);
  reorder(q.domains, p.domains);
  auto per_group = [&](auto& into, const auto& from) {
    if (from.size() != G) return;
    for (uint32_t k = 0; k < G; ++k) into[k] = from[perm[k]];
  };
  per_group(q.stacks.hosts, p.stacks.hosts);
  per_group(q.stacks.alive, p.stacks.alive);
  per_group(q.stacks.assignment, p.stacks.assignment);
  return q;
}

}  // namespace sal::plan

// golomb.cpp — see golomb.h. The search fixes m_0 = 0 (any ruler can be rotated to contain 0) and
// extends marks in increasing order; a difference table of N flags says which residues are taken.
#include "policy/algo/golomb.h"

#include <algorithm>

#include "core/deadline.h"

namespace sal::algo {
namespace {

class RulerSearch {
 public:
  RulerSearch(int modulus, int marks, uint64_t budget)
      : n_(modulus), want_(marks), budget_(budget), used_(size_t(modulus), 0) {}

  // True when a ruler was found; marks() holds it.
  bool run() {
    marks_.assign(1, 0);
    return extend();
  }
  bool exhausted() const { return visited_ >= budget_; }
  const std::vector<int>& marks() const { return marks_; }

 private:
  bool extend() {
    if (int(marks_.size()) == want_) return true;
    const int remaining = want_ - int(marks_.size());
    for (int m = marks_.back() + 1; m <= n_ - remaining; ++m) {
      if (++visited_ >= budget_ || ((visited_ & 4095) == 0 && deadline_passed())) {
        visited_ = budget_;  // the caller's deadline counts as the budget running out
        return false;
      }
      if (!take(m)) continue;
      marks_.push_back(m);
      if (extend()) return true;
      marks_.pop_back();
      release(m);
    }
    return false;
  }

  // Claims the differences between m and the current marks; false (nothing claimed) on a clash.
  bool take(int m) {
    fresh_.clear();
    for (int a : marks_) {
      for (int d : {(m - a) % n_, (a - m + n_) % n_}) {
        if (used_[d]) {
          for (int x : fresh_) used_[x] = 0;
          return false;
        }
        used_[d] = 1;
        fresh_.push_back(d);
      }
    }
    return true;
  }
  void release(int m) {
    for (int a : marks_) {
      used_[(m - a) % n_] = 0;
      used_[(a - m + n_) % n_] = 0;
    }
  }

  int n_;
  int want_;
  uint64_t budget_;
  uint64_t visited_ = 0;
  std::vector<char> used_;
  std::vector<int> marks_;
  std::vector<int> fresh_;
};

}  // namespace

bool is_cyclic_golomb_ruler(int modulus, const std::vector<int>& marks) {
  if (modulus < 1) return false;
  std::vector<char> seen(size_t(modulus), 0);
  for (size_t i = 0; i < marks.size(); ++i)
    for (size_t j = 0; j < marks.size(); ++j) {
      if (i == j) continue;
      const int d = ((marks[i] - marks[j]) % modulus + modulus) % modulus;
      if (d == 0 || seen[d]) return false;
      seen[d] = 1;
    }
  return true;
}

Result<std::vector<int>> cyclic_golomb_ruler(int modulus, int marks, uint64_t max_search_nodes) {
  if (modulus < 1 || marks < 1)
    return fail("need modulus >= 1 and marks >= 1, got ", modulus, " and ", marks);
  if (int64_t(marks) * (marks - 1) > int64_t(modulus) - 1)
    return fail("no cyclic Golomb ruler with ", marks, " marks modulo ", modulus, ": its ",
                int64_t(marks) * (marks - 1), " differences exceed the ", modulus - 1,
                " non-zero residues");
  RulerSearch search(modulus, marks, max_search_nodes);
  if (search.run()) return search.marks();
  if (search.exhausted())
    return fail("no cyclic Golomb ruler with ", marks, " marks modulo ", modulus, " found within ",
                max_search_nodes, " search nodes");
  return fail("no cyclic Golomb ruler with ", marks, " marks modulo ", modulus, " exists");
}

Result<ShardLayout> spare_layout(int groups, int redundancy, uint64_t max_search_nodes) {
  auto ruler = cyclic_golomb_ruler(groups, redundancy, max_search_nodes);
  if (!ruler.ok()) return ruler.error().with_context("SPARe layout");
  ShardLayout layout{groups, redundancy, *ruler, {}};
  layout.hosted.resize(size_t(groups));
  for (int g = 0; g < groups; ++g)
    for (int m : layout.marks) layout.hosted[g].push_back((g + m) % groups);
  return layout;
}

std::vector<std::vector<int>> hosts_of_types(const ShardLayout& layout) {
  std::vector<std::vector<int>> hosts(size_t(layout.groups));
  for (int g = 0; g < layout.groups; ++g)
    for (int t : layout.hosted[g]) hosts[t].push_back(g);
  return hosts;
}

int max_common_hosts(const ShardLayout& layout) {
  const auto hosts = hosts_of_types(layout);
  std::vector<int> shared(size_t(layout.groups), 0);
  int worst = 0;
  for (int a = 0; a < layout.groups; ++a) {
    std::fill(shared.begin(), shared.end(), 0);
    for (int g : hosts[a])
      for (int b : layout.hosted[g])
        if (b != a) worst = std::max(worst, ++shared[b]);
  }
  return worst;
}

}  // namespace sal::algo

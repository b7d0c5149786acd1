// open_slots.h — the nodes that still have free expert slots, least loaded first: what the
// placement algorithms deal replicas into (the balancer's re-deal, the frontier's constructions).
// A min-heap by node work with lazy deletion: an entry is current while its node's version is
// (every fill bumps it), so no node is listed twice and a full node drops out.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <vector>

namespace sal::algo {

class OpenSlots {
 public:
  // work[n]: node n's work so far; holes[n]: its free slots.
  OpenSlots(std::vector<double> work, std::vector<int> holes)
      : work_(std::move(work)), holes_(std::move(holes)), version_(work_.size(), 0) {
    for (size_t n = 0; n < work_.size(); ++n)
      if (holes_[n] > 0) heap_.push({work_[n], 0, int(n)}), ++open_;
  }
  // Up to k distinct open nodes for which `ok` holds, least loaded first (all stay open).
  template <class Ok>
  std::vector<int> take(size_t k, const Ok& ok) {
    std::vector<int> chosen;
    if (k >= open_) {  // every open node that qualifies: no order needed (a hot expert's replicas)
      for (size_t n = 0; n < holes_.size(); ++n)
        if (holes_[n] > 0 && ok(int(n))) chosen.push_back(int(n));
      return chosen;
    }
    std::vector<Entry> kept;
    while (!heap_.empty() && chosen.size() < k) {
      const Entry top = heap_.top();
      heap_.pop();
      const int n = std::get<2>(top);
      if (std::get<1>(top) != version_[size_t(n)] || holes_[size_t(n)] == 0) continue;  // stale
      if (ok(n)) chosen.push_back(n);
      kept.push_back(top);
    }
    for (const Entry& e : kept) heap_.push(e);
    return chosen;
  }
  // Node n takes one more replica of work w.
  void fill(int n, double w) {
    work_[size_t(n)] += w;
    ++version_[size_t(n)];
    if (--holes_[size_t(n)] > 0) {
      heap_.push({work_[size_t(n)], version_[size_t(n)], n});
    } else {
      --open_;
    }
  }
  const std::vector<double>& work() const { return work_; }

 private:
  using Entry = std::tuple<double, uint64_t, int>;  // (work, version, node)
  std::vector<double> work_;
  std::vector<int> holes_;
  std::vector<uint64_t> version_;
  size_t open_ = 0;  // nodes with a free slot
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

}  // namespace sal::algo

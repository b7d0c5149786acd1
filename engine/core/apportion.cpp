// apportion.cpp — see apportion.h.
#include "core/apportion.h"

#include <algorithm>
#include <numeric>

namespace sal {

std::vector<uint64_t> apportion(uint64_t total, const std::vector<uint64_t>& weights) {
  const size_t n = weights.size();
  std::vector<uint64_t> out(n, 0);
  const uint64_t sum = std::accumulate(weights.begin(), weights.end(), uint64_t(0));
  if (sum == 0) return out;
  std::vector<uint64_t> rest(n);
  uint64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    // total * w fits: totals are token counts and weights thousandths
    const unsigned __int128 share = (unsigned __int128)total * weights[i];
    out[i] = uint64_t(share / sum);
    rest[i] = uint64_t(share % sum);
    given += out[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rest[a] > rest[b]; });
  for (size_t k = 0; given < total && k < n; ++k, ++given) ++out[order[k]];
  return out;
}

std::pair<uint64_t, uint64_t> contiguous_share(uint64_t total, const std::vector<uint64_t>& weights, size_t party) {
  const bool none = std::all_of(weights.begin(), weights.end(), [](uint64_t w) { return w == 0; });
  std::vector<uint64_t> counts = apportion(total, none ? std::vector<uint64_t>(weights.size(), 1) : weights);
  if (total >= counts.size())
    for (auto& c : counts)
      if (c == 0) {
        ++c;
        --*std::max_element(counts.begin(), counts.end());  // the largest has more than one
      }
  uint64_t first = 0;
  for (size_t i = 0; i < party && i < counts.size(); ++i) first += counts[i];
  return {first, party < counts.size() ? counts[party] : 0};
}

}  // namespace sal

// micro_batches.cpp — see micro_batches.h.
#include "runtime/micro_batches.h"

#include <algorithm>

#include "model/data.h"

namespace sal::runtime {

std::vector<MicroPass> micro_passes(int global, const std::vector<uint32_t>& shares, int ranks, int rank, int micro) {
  auto share = [&](int r) { return model::batch_share(global, shares, ranks, r); };
  const auto [first, count] = share(rank);
  if (micro <= 0) return {MicroPass{first, count, 1.0}};
  std::vector<int> counts(size_t(std::max(ranks, 1)));
  int largest = 0;
  for (int r = 0; r < ranks; ++r) largest = std::max(largest, counts[size_t(r)] = share(r).second);
  const int passes = std::max(1, (largest + micro - 1) / micro);
  std::vector<MicroPass> out;
  for (int i = 0; i < passes; ++i) {
    auto part = [&](int n) { return std::clamp(n - i * micro, 0, micro); };
    int together = 0;
    for (int n : counts) together += part(n);
    out.push_back({first + std::min(count, i * micro), part(count), global > 0 ? double(together) / global : 1.0});
  }
  return out;
}

}  // namespace sal::runtime

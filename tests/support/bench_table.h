// bench_table.h — the tables the recovery benchmarks print (bench_recovery, bench_controller): one
// row per part of a trial, with its median, optionally its 99th percentile, and its maximum over
// the trials, as Markdown.
#pragma once

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace sal::test {

// The q-quantile of v (nearest rank); v must not be empty.
inline double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = size_t(q * double(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

template <class Trial>
using Parts = std::vector<std::pair<const char*, double Trial::*>>;

template <class Trial>
void print_parts(const std::vector<Trial>& trials, const Parts<Trial>& parts, bool with_p99) {
  std::printf(with_p99 ? "| part | p50 (ms) | p99 (ms) | max (ms) |\n| --- | ---: | ---: | ---: |\n"
                       : "| part | p50 (ms) | max (ms) |\n| --- | ---: | ---: |\n");
  for (const auto& [name, field] : parts) {
    std::vector<double> v;
    for (const Trial& t : trials) v.push_back(t.*field);
    double top = *std::max_element(v.begin(), v.end());
    if (with_p99)
      std::printf("| %s | %.1f | %.1f | %.1f |\n", name, percentile(v, 0.5), percentile(v, 0.99), top);
    else
      std::printf("| %s | %.1f | %.1f |\n", name, percentile(v, 0.5), top);
  }
}

}  // namespace sal::test

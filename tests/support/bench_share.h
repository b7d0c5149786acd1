// bench_share.h — the benchmarks' fair measurement of many workers on few cores (--cpu-share):
// each worker in a CPU cgroup of its own (mesh/cpu_share.h), by default with (cores x 0.9) /
// workers CPUs, so N workers on a 2-core machine behave like N slower dedicated cores.
#pragma once

#include <algorithm>
#include <cstdio>
#include <thread>

#include "mesh/cpu_share.h"

namespace sal::test {

// The share each of `workers` workers gets: `requested` (< 0: the default above; 0: off), or 0
// (unconfined, said on stdout) where this machine cannot confine them.
inline double fair_cpu_share(double requested, int workers) {
  if (requested == 0) return 0;
  double share = requested > 0 ? requested : double(std::max(1u, std::thread::hardware_concurrency())) * 0.9 / workers;
  auto probe = mesh::CpuShares::open(share);
  if (!probe) {
    std::printf("fair measurement unavailable (%s): workers run unconfined\n", probe.error().message().c_str());
    return 0;
  }
  probe->remove_if_empty();
  return share;
}

}  // namespace sal::test

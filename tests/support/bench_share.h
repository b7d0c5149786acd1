// bench_share.h — the benchmarks' options, and their fair measurement of many workers on few cores (--cpu-share):
// each worker in a CPU cgroup of its own (mesh/cpu_share.h), by default with (cores x 0.9) /
// workers CPUs, so N workers on a 2-core machine behave like N slower dedicated cores.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
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

// A benchmark's options: `--name value` pairs into `ints` and `doubles`, and the flag
// --no-cpu-share (cpu_share = 0; --cpu-share F is `cpu_share`'s own pair). False on anything else,
// a missing value or one that does not parse (the caller prints its usage line).
inline bool parse_bench_options(int argc, char** argv, const std::map<std::string, int*>& ints,
                                std::map<std::string, double*> doubles, double& cpu_share) {
  doubles.emplace("--cpu-share", &cpu_share);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-cpu-share") {
      cpu_share = 0;
      continue;
    }
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    try {
      if (doubles.count(a)) *doubles.at(a) = std::stod(v);
      else if (ints.count(a)) *ints.at(a) = std::stoi(v);
      else return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

}  // namespace sal::test

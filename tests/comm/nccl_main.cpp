// nccl_main.cpp — main() of the NCCL data-plane test: doctest, except that a run on a machine
// without a usable GPU exits 77, which CTest (SKIP_RETURN_CODE) reports as skipped. Listing the
// cases works everywhere, so CTest learns every case at build time. Unlike the kernel tests'
// gpu_main.cpp, it counts the GPUs in a forked child (gpu_probe.h): the test forks one worker per
// GPU, and this process must not have initialised CUDA when it does.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

#include "comm/gpu_probe.h"
#include "support/temp_dirs.h"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    if (std::strstr(argv[i], "list-test-cases") || std::strcmp(argv[i], "-ltc") == 0) listing = true;
  if (!listing) {
    auto& gpus = sal::test::probed_gpus();
    gpus = sal::test::probe_gpus();
    if (gpus.count == 0) {
      std::puts("skipped: no usable GPU on this machine");
      return 77;
    }
    std::printf("%d GPU(s), %s\n", gpus.count, gpus.versions.c_str());
    for (const auto& n : gpus.names) std::printf("  %s\n", n.c_str());
  }
  doctest::Context ctx(argc, argv);
  return sal::test::finish_temp_dirs(ctx.run());
}

// gpu_main.cpp — main() of the GPU kernel tests: doctest, except that a run on a build or machine
// without a usable GPU exits 77, which CTest (SKIP_RETURN_CODE) reports as skipped. Listing the
// cases works everywhere, so CTest learns every case at build time, GPU or not.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

#include "kernels/cuda/device.h"
#include "support/temp_dirs.h"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    if (std::strstr(argv[i], "list-test-cases") || std::strcmp(argv[i], "-ltc") == 0) listing = true;
  if (!listing && sal::kernels::cuda::device_count() == 0) {
    std::puts("skipped: no usable GPU on this machine");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return sal::test::finish_temp_dirs(ctx.run());
}

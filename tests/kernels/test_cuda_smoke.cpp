// test_cuda_smoke.cpp — the CUDA path end to end: a kernel against its CPU reference, cuBLAS and
// NCCL linked and answering. Exits 77 (CTest: skipped) when the build has no CUDA path or the
// machine has no usable GPU.
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/cpu/blas1.h"

#ifdef SAL_HAVE_CUDA
#include <cuda_runtime.h>

#include <memory>

#include "kernels/cuda/blas1.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device.h"
#endif

constexpr int kSkip = 77;

int main() {
#ifndef SAL_HAVE_CUDA
  std::puts("skipped: built without the CUDA path");
  return kSkip;
#else
  using namespace sal::kernels;
  std::printf("%s\n", cuda::library_versions().c_str());
  if (cuda::device_count() == 0) {
    std::puts("skipped: no usable GPU on this machine");
    return kSkip;
  }
  std::printf("device 0: %s\n", cuda::describe(0).c_str());
  const size_t n = 1 << 20;
  std::vector<float> x(n), y(n), ref(n), got(n, NAN);
  for (size_t i = 0; i < n; ++i) {
    x[i] = float(i % 97) * 0.25f;
    y[i] = ref[i] = float(i % 13) - 6.0f;
  }
  cpu::axpy(n, 1.5f, x.data(), ref.data());
  float *dx = nullptr, *dy = nullptr;
  if (cudaMalloc(&dx, n * 4) || cudaMalloc(&dy, n * 4)) return std::puts("cudaMalloc failed"), 1;
  cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * 4, cudaMemcpyHostToDevice);
  std::unique_ptr<cuda::Context> ctx;
  if (auto s = cuda::Context::create(0, &ctx); !s.ok()) return std::printf("%s\n", s.what().c_str()), 1;
  if (auto s = cuda::axpy(*ctx, n, 1.5f, dx, dy); !s.ok()) return std::printf("%s\n", s.what().c_str()), 1;
  if (auto s = ctx->synchronize(); !s.ok()) return std::printf("%s\n", s.what().c_str()), 1;
  cudaMemcpy(got.data(), dy, n * 4, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(double(got[i]) - ref[i]));
  std::printf("axpy max abs error vs CPU: %g\n", worst);
  return worst <= 1e-5 ? 0 : 1;
#endif
}

// context.h — what every kernels/cuda call runs on: one device, one stream, the cuBLAS and
// cuBLASLt handles bound to that stream, and a cuBLASLt workspace. A worker owns one Context per
// GPU; kernels enqueue on ctx.stream() and never synchronise unless their comment says so.
//
// Conventions of every kernels/cuda header (they mirror kernels/cpu, on device pointers):
// row-major contiguous; sizes as int (size_t for flat lengths); outputs overwritten unless the
// comment says "accumulates". Activations and gradients are fp32; GEMM operands are bf16 copies
// (`Bf16`) with fp32 accumulation, master weights and optimizer state fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "kernels/cuda/status.h"

// The bf16 type and cuBLAS's and cuBLASLt's handles, declared as their own headers declare them:
// most kernels use neither library, and those headers cost each file about a second of nvcc.
// A file that computes in bf16 or calls cuBLAS includes cuda_bf16.h, cublas_v2.h or cublasLt.h.
struct __nv_bfloat16;
typedef struct cublasContext* cublasHandle_t;
typedef struct cublasLtContext* cublasLtHandle_t;

namespace sal::kernels::cuda {

using Bf16 = __nv_bfloat16;

class Context {
 public:
  // Binds `device`, creates a non-blocking stream, the handles and a workspace of ws_bytes.
  static Status create(int device, std::unique_ptr<Context>* out, size_t ws_bytes = size_t(32) << 20);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return ws_bytes_; }
  // Multiprocessors on the device: kernels size persistent grids with it.
  int sm_count() const { return sm_count_; }
  // Waits for everything enqueued on the stream.
  Status synchronize() const;

 private:
  Context() = default;
  int device_ = 0, sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t ws_bytes_ = 0;
};

}  // namespace sal::kernels::cuda

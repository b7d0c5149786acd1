// context.cpp — see context.h.
#include "kernels/cuda/context.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace sal::kernels::cuda {

Status Context::create(int device, std::unique_ptr<Context>* out, size_t ws_bytes) {
  std::unique_ptr<Context> c(new Context());
  c->device_ = device;
  SAL_CUDA_TRY(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
  SAL_CUDA_TRY(cuda_status(cudaDeviceGetAttribute(&c->sm_count_, cudaDevAttrMultiProcessorCount, device),
                           "cudaDeviceGetAttribute (multiprocessors)"));
  SAL_CUDA_TRY(cuda_status(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  SAL_CUDA_TRY(cublas_status(cublasCreate(&c->blas_), "cublasCreate"));
  SAL_CUDA_TRY(cublas_status(cublasSetStream(c->blas_, c->stream_), "cublasSetStream"));
  SAL_CUDA_TRY(cublas_status(cublasLtCreate(&c->lt_), "cublasLtCreate"));
  if (ws_bytes > 0) {
    SAL_CUDA_TRY(cuda_status(cudaMalloc(&c->workspace_, ws_bytes), "cudaMalloc (cuBLASLt workspace)"));
    c->ws_bytes_ = ws_bytes;
    SAL_CUDA_TRY(cublas_status(cublasSetWorkspace(c->blas_, c->workspace_, ws_bytes), "cublasSetWorkspace"));
  }
  *out = std::move(c);
  return {};
}

Context::~Context() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (lt_) cublasLtDestroy(lt_);
  if (blas_) cublasDestroy(blas_);
  if (workspace_) cudaFree(workspace_);
  if (stream_) cudaStreamDestroy(stream_);
}

Status Context::synchronize() const { return cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

}  // namespace sal::kernels::cuda

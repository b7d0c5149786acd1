// status.cpp — see status.h: library codes to readable Status values.
#include "kernels/cuda/status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace sal::kernels::cuda {
namespace {

Status make(int code, const char* where, const char* text) {
  if (code == 0) return {};
  return Status(code, std::string(where) + ": " + text);
}

}  // namespace

Status cuda_status(int cuda_error, const char* where) {
  return make(cuda_error, where, cudaGetErrorString(cudaError_t(cuda_error)));
}

Status cublas_status(int st, const char* where) {
  return make(st, where, cublasGetStatusString(cublasStatus_t(st)));
}

Status nccl_status(int result, const char* where) {
  return make(result, where, ncclGetErrorString(ncclResult_t(result)));
}

Status launch_status(const char* kernel) { return cuda_status(int(cudaGetLastError()), kernel); }

Status invalid_argument(const std::string& what) { return Status(int(cudaErrorInvalidValue), what); }

}  // namespace sal::kernels::cuda

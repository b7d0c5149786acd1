// status.h — how kernels/cuda reports errors. Every kernel entry point returns a Status: ok, or the
// failed call and the library's own error text ("cublasGemmEx (expert up-projection):
// CUBLAS_STATUS_NOT_SUPPORTED"). Kernels never throw: the worker loop that calls them turns a
// failed Status into an error report for the controller, and the job goes on without that worker.
#pragma once

#include <string>

namespace sal::kernels::cuda {

class Status {
 public:
  Status() = default;
  Status(int code, std::string what) : code_(code), what_(std::move(what)) {}

  bool ok() const { return code_ == 0; }
  // The library's own code (cudaError_t, cublasStatus_t or ncclResult_t); 0 when ok.
  int code() const { return code_; }
  // "where: error text"; empty when ok.
  const std::string& what() const { return what_; }

 private:
  int code_ = 0;
  std::string what_;
};

// Turn a library return code into a Status naming `where` (the call and what it was for).
Status cuda_status(int cuda_error, const char* where);
Status cublas_status(int cublas_status, const char* where);
Status nccl_status(int nccl_result, const char* where);
// After a kernel launch: cudaGetLastError() as a Status naming the kernel.
Status launch_status(const char* kernel);
// A bad argument caught before any launch (sizes, k > N, null pointers).
Status invalid_argument(const std::string& what);

}  // namespace sal::kernels::cuda

// Return early from the enclosing function when a Status-valued expression failed.
#define SAL_CUDA_TRY(expr)                          \
  do {                                              \
    ::sal::kernels::cuda::Status sal_try_s_ = (expr); \
    if (!sal_try_s_.ok()) return sal_try_s_;        \
  } while (0)

// buffer.h — device memory owned by a value: Buffer<T> frees what it allocated, moves but never
// copies, and reports allocation failure as a Status (a GPU out of memory is an error to report,
// not a crash). Host-side uploads, downloads and fills are synchronous helpers for tests and
// set-up: each waits for the whole device, because cudaMemcpy and cudaMemset run on the legacy
// default stream, which a Context's non-blocking stream does not wait for (seen on an H200: a
// poison fill that had not landed yet overwrote what the next kernel wrote). The training loop
// copies with cudaMemcpyAsync on its own stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/status.h"

namespace sal::kernels::cuda {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Allocates n elements (contents undefined); 0 frees.
  Status allocate(size_t n) {
    reset();
    if (n == 0) return {};
    void* p = nullptr;
    Status s = cuda_status(int(cudaMalloc(&p, n * sizeof(T))), "cudaMalloc");
    if (!s.ok()) return s;
    p_ = static_cast<T*>(p);
    n_ = n;
    return {};
  }
  // Allocates and copies `host` in (synchronous).
  Status upload(const std::vector<T>& host) {
    SAL_CUDA_TRY(allocate(host.size()));
    if (host.empty()) return {};
    SAL_CUDA_TRY(cuda_status(int(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice)),
                             "cudaMemcpy (upload)"));
    return settle();
  }
  // Copies the whole buffer out (synchronous; waits for the device).
  Status download(std::vector<T>* host) const {
    host->resize(n_);
    if (n_ == 0) return {};
    SAL_CUDA_TRY(settle());
    return cuda_status(int(cudaMemcpy(host->data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost)),
                       "cudaMemcpy (download)");
  }
  // Fills every byte with `byte` (0xFF turns floats into NaN: tests poison outputs with it).
  Status fill_bytes(int byte) {
    if (n_ == 0) return {};
    SAL_CUDA_TRY(cuda_status(int(cudaMemset(p_, byte, n_ * sizeof(T))), "cudaMemset"));
    return settle();
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }

  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  // Every stream of the device done: a legacy-stream copy or fill has landed, and no kernel
  // still writes what a download reads.
  static Status settle() { return cuda_status(int(cudaDeviceSynchronize()), "cudaDeviceSynchronize"); }

  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace sal::kernels::cuda

// nccl_internal.h — internal to sal_comm_nccl (nccl_collectives.cpp, nccl_p2p.cpp, nccl_epoch.cpp):
// what more than one of those files needs — NCCL and CUDA errors as Error, the scope that makes the
// object's GPU current, the polling pace every wait uses — and the definition of the object's
// scratch (device scratch + pinned host staging; its allocation lives in nccl_epoch.cpp). Not part
// of the library's interface: include nccl_collectives.h instead.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "comm/nccl_collectives.h"
#include "core/clock.h"
#include "core/result.h"

namespace sal::comm {

namespace nccl_detail {

inline std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

inline Error nccl_error(ncclResult_t r, const char* call, ncclComm_t comm) {
  return Error(std::string(call) + ": " + nccl_text(r, comm), int(r));
}

inline Error cuda_error(cudaError_t e, const char* call) {
  return Error(std::string(call) + ": " + cudaGetErrorString(e), int(e));
}

// Makes `device` current for a scope (NCCL and the stream belong to it), restoring the caller's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (prev_ != device) ok_ = cudaSetDevice(device) == cudaSuccess;
    if (prev_ == device) prev_ = -1;  // nothing to restore
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  bool ok() const { return ok_; }

 private:
  int prev_ = -1;
  bool ok_ = true;
};

// Polling pace: spin for the first 100 µs (small collectives finish in a few µs and a sleep would
// dominate their latency), then sleep 10 µs doubling up to 1 ms.
class Backoff {
 public:
  void pause() {
    if (mono_ns() - start_ns_ < 100'000) {
      std::this_thread::yield();
      return;
    }
    sleep_us_ = sleep_us_ == 0 ? 10 : std::min<int64_t>(sleep_us_ * 2, 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  }

 private:
  int64_t start_ns_ = mono_ns();
  int64_t sleep_us_ = 0;
};

inline double since_ms(int64_t t0_ns) { return double(mono_ns() - t0_ns) / 1e6; }

}  // namespace nccl_detail

// Device scratch for what the object sends itself (barrier value, counts, p2p summaries) and a
// pinned host mirror: pinned, so that copies from it are truly asynchronous and a hung stream can
// never block the host inside cudaMemcpyAsync. The device part is stream-ordered
// (cudaMallocAsync / cudaFreeAsync on the object's stream): neither synchronises the device.
struct NcclCollectives::Scratch {
  void* dev = nullptr;
  void* host = nullptr;
  size_t dev_bytes = 0;
  size_t host_bytes = 0;

  bool plain = false;  // allocated with cudaMalloc: the device has no stream-ordered allocator

  void release(cudaStream_t stream);              // nccl_epoch.cpp
  Status ensure(size_t need, cudaStream_t stream);  // nccl_epoch.cpp
  template <class T>
  T* host_as(size_t byte_offset = 0) {
    return reinterpret_cast<T*>(static_cast<char*>(host) + byte_offset);
  }
  template <class T>
  T* dev_as(size_t byte_offset = 0) {
    return reinterpret_cast<T*>(static_cast<char*>(dev) + byte_offset);
  }
};

}  // namespace sal::comm

// nccl_collectives.cpp — see nccl_collectives.h. Every collective runs under run(): it holds
// call_mu_ (so NCCL sees one thread at a time), refuses a spent object, validates, enqueues on the
// object's stream (settle() handles non-blocking NCCL's ncclInProgress), then wait_stream() polls
// until the stream is idle. A failure spends the epoch and remembers whether work may still be
// running on the stream (outstanding_), which decides how the communicator must be torn down.
// Point to point is in nccl_p2p.cpp; the scratch, connecting and recovery (the epoch's life) in
// nccl_epoch.cpp; what they share in nccl_internal.h.
#include "comm/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "comm/nccl_internal.h"
#include "core/clock.h"

namespace sal::comm {

using nccl_detail::Backoff;
using nccl_detail::cuda_error;
using nccl_detail::DeviceGuard;
using nccl_detail::nccl_error;
using nccl_detail::nccl_text;
using nccl_detail::since_ms;

// ---------- state ----------

std::string NcclCollectives::reason() const {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return reason_.empty() ? "epoch '" + prefix_ + "' is over" : reason_;
}

void NcclCollectives::spend(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (reason_.empty()) reason_ = reason;
  }
  spent_.store(true);
}

void NcclCollectives::abort(const std::string& why) { spend("epoch '" + prefix_ + "' aborted: " + why); }

void NcclCollectives::set_op_timeout(std::chrono::milliseconds t) { op_timeout_ms_.store(t.count() > 0 ? t.count() : 1); }

void NcclCollectives::set_producer_stream(CUstream_st* producer) {
  std::lock_guard<std::mutex> lock(call_mu_);
  producer_ = producer;
}

bool NcclCollectives::revoked() const { return revoked_.load(); }
bool NcclCollectives::destroyed() const { return destroyed_.load(); }
bool NcclCollectives::outstanding_work() const { return outstanding_.load(); }

void NcclCollectives::release_cuda() {
  DeviceGuard dev(device_);
  if (scratch_) scratch_->release(stream_);
  scratch_.reset();
  if (event_) cudaEventDestroy(event_);
  if (stream_) cudaStreamDestroy(stream_);
  event_ = nullptr;
  stream_ = nullptr;
}

// ---------- the guard and the waits ----------

Status NcclCollectives::run(const std::string& what, const std::function<Status()>& body) {
  std::lock_guard<std::mutex> lock(call_mu_);
  if (spent_.load()) return fail(what, ": ", reason());
  Status st;
  {
    DeviceGuard dev(device_);
    if (!dev.ok()) {
      st = fail("cannot make GPU ", device_, " current");
    } else if (!comm_) {
      st = fail("the communicator is destroyed");
    } else {
      enqueued_ = false;
      st = order_after_producer();
      if (st) st = body();
    }
  }
  if (st) return ok_status();
  if (enqueued_) outstanding_.store(true);  // the stream may still run what this call enqueued
  enqueued_ = false;
  spend("failed earlier: " + what + ": " + st.error().message());
  return Error(what + ": " + st.error().message(), st.error().code());
}

// Makes this call's work start after everything already enqueued on the producer stream.
Status NcclCollectives::order_after_producer() {
  if (!producer_) return ok_status();
  if (!event_) {
    if (auto e = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming); e != cudaSuccess) {
      event_ = nullptr;
      return cuda_error(e, "cudaEventCreateWithFlags");
    }
  }
  if (auto e = cudaEventRecord(event_, producer_); e != cudaSuccess) return cuda_error(e, "cudaEventRecord (producer)");
  if (auto e = cudaStreamWaitEvent(stream_, event_, 0); e != cudaSuccess) return cuda_error(e, "cudaStreamWaitEvent");
  return ok_status();
}

Status NcclCollectives::settle(int nccl_result, const char* call) {
  auto r = ncclResult_t(nccl_result);
  if (r == ncclSuccess) return ok_status();
  if (r != ncclInProgress) return nccl_error(r, call, comm_);
  // Non-blocking NCCL is still enqueuing in the background; nothing else may be called until the
  // communicator leaves ncclInProgress.
  const int64_t timeout_ms = op_timeout_ms_.load();
  const int64_t deadline = mono_ns() + timeout_ms * 1'000'000;
  Backoff backoff;
  for (;;) {
    if (spent_.load()) return Error(reason());
    ncclResult_t state = ncclInProgress;
    ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) return nccl_error(q, "ncclCommGetAsyncError", comm_);
    if (state == ncclSuccess) return ok_status();
    if (state != ncclInProgress) return nccl_error(state, call, comm_);
    if (mono_ns() > deadline) return fail(call, ": still enqueuing after ", timeout_ms, " ms (timed out)");
    backoff.pause();
  }
}

Status NcclCollectives::wait_stream(const char* stage) {
  const int64_t timeout_ms = op_timeout_ms_.load();
  const int64_t t0 = mono_ns();
  const int64_t deadline = t0 + timeout_ms * 1'000'000;
  Backoff backoff;
  for (;;) {
    if (spent_.load()) return Error(reason());  // abort() from another thread
    cudaError_t q = cudaStreamQuery(stream_);
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return nccl_error(r, "ncclCommGetAsyncError", comm_);
    if (state != ncclSuccess && state != ncclInProgress) {
      return Error(std::string("NCCL reported an error during ") + stage + ": " + nccl_text(state, comm_), int(state));
    }
    if (q == cudaSuccess) {
      enqueued_ = false;
      return ok_status();
    }
    if (q != cudaErrorNotReady) return cuda_error(q, "cudaStreamQuery");
    if (mono_ns() > deadline) {
      return fail("timed out after ", int64_t(since_ms(t0)), " ms waiting for ", stage, " (op timeout ", timeout_ms,
                  " ms)");
    }
    backoff.pause();
  }
}

// ---------- collectives ----------

template <class T>
Status NcclCollectives::allreduce_impl(T* data, size_t n, const char* type) {
  const std::string what = "allreduce of " + std::to_string(n) + " " + type;
  return run(what, [&]() -> Status {
    if (n > 0 && !data) return fail("null data");
    if (n == 0) return ok_status();
    const ncclDataType_t dtype = sizeof(T) == 4 ? ncclFloat32 : ncclFloat64;
    enqueued_ = true;
    SAL_TRY(settle(ncclAllReduce(data, data, n, dtype, ncclSum, comm_, stream_), "ncclAllReduce"));
    return wait_stream("the all-reduce");
  });
}

Status NcclCollectives::allreduce_sum(float* data, size_t n) { return allreduce_impl(data, n, "floats"); }
Status NcclCollectives::allreduce_sum(double* data, size_t n) { return allreduce_impl(data, n, "doubles"); }

Status NcclCollectives::allgather(const void* in, size_t bytes, void* out) {
  const std::string what = "allgather of " + std::to_string(bytes) + " bytes per rank";
  return run(what, [&]() -> Status {
    if (bytes > 0 && (!in || !out)) return fail("null buffer");
    if (bytes == 0) return ok_status();
    enqueued_ = true;
    SAL_TRY(settle(ncclAllGather(in, out, bytes, ncclUint8, comm_, stream_), "ncclAllGather"));
    return wait_stream("the all-gather");
  });
}

Status NcclCollectives::barrier() {
  return run("barrier", [&]() -> Status {
    SAL_TRY(scratch_->ensure(sizeof(float), stream_));
    enqueued_ = true;
    float* one = scratch_->dev_as<float>();
    SAL_TRY(settle(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)"));
    return wait_stream("the barrier");
  });
}

// Every rank's send and receive counts, all-gathered through NCCL; every rank checks the whole
// matrix, so all of them reach the same verdict. Runs inside run() (call_mu_ held).
Status NcclCollectives::check_counts(const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts) {
  const size_t n = size_t(size_);
  const size_t mine_bytes = 2 * n * sizeof(int64_t);
  SAL_TRY(scratch_->ensure(mine_bytes * (n + 1), stream_));
  int64_t* host_in = scratch_->host_as<int64_t>();
  int64_t* host_all = scratch_->host_as<int64_t>(mine_bytes);
  std::copy(send_counts.begin(), send_counts.end(), host_in);
  std::copy(recv_counts.begin(), recv_counts.end(), host_in + n);
  enqueued_ = true;
  if (auto e = cudaMemcpyAsync(scratch_->dev, host_in, mine_bytes, cudaMemcpyHostToDevice, stream_); e != cudaSuccess) {
    return cuda_error(e, "cudaMemcpyAsync (counts)");
  }
  SAL_TRY(settle(ncclAllGather(scratch_->dev, scratch_->dev_as<char>(mine_bytes), 2 * n, ncclInt64, comm_, stream_),
                 "ncclAllGather (counts)"));
  if (auto e = cudaMemcpyAsync(host_all, scratch_->dev_as<char>(mine_bytes), mine_bytes * n, cudaMemcpyDeviceToHost,
                               stream_);
      e != cudaSuccess) {
    return cuda_error(e, "cudaMemcpyAsync (counts)");
  }
  SAL_TRY(wait_stream("the all-gather of the counts"));
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) {
      int64_t sent = host_all[s * 2 * n + d];
      int64_t expected = host_all[d * 2 * n + n + s];
      if (sent != expected) return fail("rank ", s, " sends ", sent, " floats to rank ", d, ", which expects ", expected);
    }
  }
  return ok_status();
}

Status NcclCollectives::alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                                  const std::vector<int64_t>& recv_counts) {
  const size_t n = size_t(size_);
  bool bad = send_counts.size() != n || recv_counts.size() != n;
  int64_t total_send = 0, total_recv = 0;
  for (size_t i = 0; !bad && i < n; ++i) {
    bad = send_counts[i] < 0 || recv_counts[i] < 0;
    total_send += send_counts[i];
    total_recv += recv_counts[i];
  }
  const std::string what = "alltoallv sending " + std::to_string(total_send) + " and receiving " +
                           std::to_string(total_recv) + " floats";
  return run(what, [&]() -> Status {
    if (bad) return fail("counts must be size() non-negative numbers each");
    if ((total_send > 0 && !send) || (total_recv > 0 && !recv)) return fail("null buffer");
    const size_t me = size_t(rank_);
    // First the shared check (every rank takes part, so all reach the same verdict), then the
    // local one, which the shared check has already covered when it ran.
    if (opts_.verify_sizes && n > 1) SAL_TRY(check_counts(send_counts, recv_counts));
    if (send_counts[me] != recv_counts[me]) {
      return fail("this rank sends ", send_counts[me], " floats to itself but expects ", recv_counts[me]);
    }
    // Offsets of each peer's block, packed in rank order.
    std::vector<size_t> soff(n + 1, 0), roff(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      soff[i + 1] = soff[i] + size_t(send_counts[i]);
      roff[i + 1] = roff[i] + size_t(recv_counts[i]);
    }
    if (send_counts[me] > 0) {  // this rank's own block: a device copy, no NCCL self-send needed
      enqueued_ = true;
      if (auto e = cudaMemcpyAsync(recv + roff[me], send + soff[me], size_t(send_counts[me]) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream_);
          e != cudaSuccess) {
        return cuda_error(e, "cudaMemcpyAsync (own block)");
      }
    }
    bool any_peer = false;
    for (size_t i = 0; i < n; ++i) any_peer = any_peer || (i != me && (send_counts[i] > 0 || recv_counts[i] > 0));
    if (any_peer) {
      enqueued_ = true;
      ncclResult_t first = ncclGroupStart();
      for (size_t i = 0; first == ncclSuccess && i < n; ++i) {
        if (i == me) continue;
        if (send_counts[i] > 0) first = ncclSend(send + soff[i], size_t(send_counts[i]), ncclFloat32, int(i), comm_, stream_);
        if (first == ncclSuccess && recv_counts[i] > 0) {
          first = ncclRecv(recv + roff[i], size_t(recv_counts[i]), ncclFloat32, int(i), comm_, stream_);
        }
      }
      ncclResult_t end = ncclGroupEnd();  // always close the group, whatever happened inside
      if (first != ncclSuccess) return nccl_error(first, "ncclSend/ncclRecv (alltoallv)", comm_);
      SAL_TRY(settle(end, "ncclGroupEnd (alltoallv)"));
    }
    return wait_stream("the all-to-all");
  });
}

// ---------- versions ----------

int nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 0;
  return v;
}

std::string nccl_version_text() {
  int v = nccl_version();
  // NCCL_VERSION(X,Y,Z): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9.
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  int patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace sal::comm

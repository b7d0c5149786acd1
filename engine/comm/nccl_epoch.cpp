// nccl_epoch.cpp — the life of one NcclCollectives epoch (nccl_collectives.h): its scratch
// (allocated once, when the communicator is new, from a process-wide pool of pinned host blocks),
// connecting (rank 0 publishes the ncclUniqueId in the store, the others wait for it in slices; the
// communicator is created non-blocking and polled until ready under a deadline), and recovery and
// teardown (revoke, abort_and_destroy, destroy, shrink, the destructor), which choose between
// ncclCommAbort, ncclCommRevoke and ncclCommFinalize by whether work may still run on the stream.
#include "comm/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/nccl_internal.h"
#include "comm/store_client.h"
#include "core/clock.h"

namespace sal::comm {

using nccl_detail::Backoff;
using nccl_detail::cuda_error;
using nccl_detail::DeviceGuard;
using nccl_detail::nccl_error;
using nccl_detail::since_ms;

namespace {

using ms = std::chrono::milliseconds;

constexpr int64_t kIdSliceMs = 250;  // store waits for the id, per slice

bool started(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;     // every call returns at once; we poll, so abort and timeouts work
  config.splitShare = 0;   // a child never shares resources (or abort flags) with its parent,
  config.shrinkShare = 0;  // so aborting the old epoch cannot touch the new one
  return config;
}

// Polls a communicator's pending operation (creation, finalize, revoke, shrink) until it settles,
// fails, passes its deadline or is cancelled; `late` says what the deadline's error calls the state.
Status poll_settled(ncclComm_t comm, int64_t timeout_ms, const std::atomic<bool>* cancel, const char* what,
                    const char* late) {
  const int64_t deadline = mono_ns() + timeout_ms * 1'000'000;
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return nccl_error(r, "ncclCommGetAsyncError", comm).context(what);
    if (state == ncclSuccess) return ok_status();
    if (state != ncclInProgress) return nccl_error(state, what, comm);
    if (cancel && cancel->load()) return fail(what, ": cancelled");
    if (mono_ns() > deadline) return fail(what, ": ", late, " after ", timeout_ms, " ms");
    backoff.pause();
  }
}

Status validate(const NcclOptions& o) {
  if (o.size < 1) return fail("size must be >= 1, got ", o.size);
  if (o.rank < 0 || o.rank >= o.size) return fail("rank ", o.rank, " out of range for size ", o.size);
  if (o.device < 0) return fail("device must be >= 0, got ", o.device);
  if (o.prefix.empty()) return fail("an epoch prefix is required (e.g. \"epoch-7\")");
  if (o.rendezvous_timeout_ms <= 0 || o.init_timeout_ms <= 0 || o.op_timeout_ms <= 0 || o.teardown_timeout_ms <= 0) {
    return fail("timeouts must be > 0");
  }
  return ok_status();
}

// Rank 0 makes the id and publishes it; the others wait for it in slices (cancel is seen between
// slices, StoreClient::interrupt() within one).
Result<ncclUniqueId> rendezvous(const NcclOptions& o, StoreClient& store) {
  const std::string key = o.prefix + "/nccl-id";
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (o.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return nccl_error(r, "ncclGetUniqueId", nullptr);
    std::vector<char> value(sizeof id);
    std::memcpy(value.data(), &id, sizeof id);
    if (auto st = store.put(key, value); !st) return st.error().with_context("publishing the NCCL id");
    return id;
  }
  const int64_t deadline = mono_ms() + o.rendezvous_timeout_ms;
  for (;;) {
    if (o.cancel && o.cancel->load()) return fail("waiting for rank 0's NCCL id: cancelled");
    int64_t left = deadline - mono_ms();
    if (left <= 0) return fail("rank 0's NCCL id ('", key, "') did not appear within ", o.rendezvous_timeout_ms, " ms");
    auto v = store.fetch(key, ms(std::min(left, kIdSliceMs)));
    if (v) {
      if (v->size() != sizeof id) return fail("'", key, "' holds ", v->size(), " bytes, not an NCCL id");
      std::memcpy(&id, v->data(), sizeof id);
      return id;
    }
    if (v.error().code() != int(StoreCode::timeout)) return v.error().with_context("waiting for rank 0's NCCL id");
  }
}

std::string list_text(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

}  // namespace

// ---------- scratch ----------

// Pinned host blocks, kept for the life of the process and reused by later epochs: freeing pinned
// memory (cudaFreeHost) and allocating it may synchronise the device, which would hang behind a
// collective kernel stuck on some other communicator — exactly when the agent is recovering.
class PinnedPool {
 public:
  static void* take(size_t bytes, size_t* got) {
    {
      std::lock_guard<std::mutex> lock(mu());
      auto& blocks = free_blocks();
      auto it = blocks.lower_bound(bytes);
      if (it != blocks.end()) {
        *got = it->first;
        void* p = it->second;
        blocks.erase(it);
        return p;
      }
    }
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) return nullptr;
    *got = bytes;
    return p;
  }
  static void give(void* p, size_t bytes) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu());
    free_blocks().emplace(bytes, p);
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::multimap<size_t, void*>& free_blocks() {
    static auto* blocks = new std::multimap<size_t, void*>();  // never destroyed: blocks outlive exit order
    return *blocks;
  }
};

// The scratch (nccl_internal.h): release() and ensure().
void NcclCollectives::Scratch::release(cudaStream_t stream) {
  if (dev) plain ? cudaFree(dev) : cudaFreeAsync(dev, stream);
  PinnedPool::give(host, host_bytes);
  dev = host = nullptr;
  dev_bytes = host_bytes = 0;
}

Status NcclCollectives::Scratch::ensure(size_t need, cudaStream_t stream) {
  if (need <= dev_bytes && need <= host_bytes) return ok_status();
  release(stream);
  need = std::max<size_t>(need, 4096);
  cudaError_t e = cudaMallocAsync(&dev, need, stream);
  plain = e == cudaErrorNotSupported;
  if (plain) {
    cudaGetLastError();  // clear it, then the synchronous allocator
    e = cudaMalloc(&dev, need);
  }
  if (e != cudaSuccess) {
    dev = nullptr;
    return cuda_error(e, "cudaMallocAsync (scratch)");
  }
  dev_bytes = need;
  host = PinnedPool::take(need, &host_bytes);
  if (!host) return fail("cudaMallocHost (scratch) of ", need, " bytes failed");
  return ok_status();
}

// The most scratch any call needs: the barrier's float, the all-gathered counts (2n values from
// each of n ranks, plus this rank's own), the p2p summaries (one out and one in per peer).
size_t NcclCollectives::scratch_need() const {
  const size_t n = size_t(size_);
  size_t need = sizeof(double);
  if (opts_.verify_sizes) {
    need = std::max(need, 2 * n * sizeof(int64_t) * (n + 1));
    need = std::max(need, 2 * n * size_t(64));
  }
  return need;
}

// Allocates the scratch once, when the communicator is new, so no call allocates.
Status NcclCollectives::prepare() {
  std::lock_guard<std::mutex> lock(call_mu_);
  DeviceGuard dev(device_);
  return scratch_->ensure(scratch_need(), stream_);
}

// ---------- connect ----------

Result<std::unique_ptr<NcclCollectives>> connect_nccl_object(const NcclOptions& opts, StoreClient& store) {
  const std::string what = "connecting NCCL rank " + std::to_string(opts.rank) + " of " + std::to_string(opts.size) +
                           " on GPU " + std::to_string(opts.device) + " under '" + opts.prefix + "'";
  if (auto st = validate(opts); !st) return st.error().with_context(what);
  if (auto e = cudaSetDevice(opts.device); e != cudaSuccess) return cuda_error(e, "cudaSetDevice").context(what);

  int64_t t0 = mono_ns();
  auto id = rendezvous(opts, store);
  if (!id) return id.error().with_context(what);
  const double rendezvous_ms = since_ms(t0);

  int64_t t1 = mono_ns();
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, opts.size, *id, opts.rank, &config);
  if (!started(r)) {
    Error e = nccl_error(r, "ncclCommInitRankConfig", comm);
    if (comm) ncclCommAbort(comm);
    if (r == ncclInvalidUsage) e = Error(e.message() + " (NCCL refuses two ranks on one GPU: workers sharing a GPU must use the Gloo path)", int(r));
    return e.context(what);
  }
  if (auto st = poll_settled(comm, opts.init_timeout_ms, opts.cancel, "ncclCommInitRankConfig", "not ready"); !st) {
    ncclCommAbort(comm);  // ends a pending init too (NCCL's documented way out)
    return st.error().with_context(what);
  }
  const double init_ms = since_ms(t1);

  cudaStream_t stream = nullptr;
  if (auto e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    ncclCommAbort(comm);
    return cuda_error(e, "cudaStreamCreateWithFlags").context(what);
  }
  std::unique_ptr<NcclCollectives> c(new NcclCollectives(opts, comm, stream, rendezvous_ms, init_ms));
  if (auto st = c->prepare(); !st) {
    c->abort("setting up failed");  // so the destructor aborts rather than waits for the peers
    return st.error().with_context(what);
  }
  return c;
}

Result<std::unique_ptr<Collectives>> connect_nccl(const NcclOptions& opts, StoreClient& store) {
  auto c = connect_nccl_object(opts, store);
  if (!c) return c.error();
  return std::unique_ptr<Collectives>(std::move(*c));
}

NcclCollectives::NcclCollectives(const NcclOptions& opts, ncclComm* comm, CUstream_st* stream, double rendezvous_ms,
                                 double init_ms)
    : rank_(opts.rank),
      size_(opts.size),
      device_(opts.device),
      prefix_(opts.prefix),
      opts_([&] {
        NcclOptions o = opts;
        o.cancel = nullptr;  // the caller's flag lives only as long as the connect
        return o;
      }()),
      rendezvous_ms_(rendezvous_ms),
      init_ms_(init_ms),
      op_timeout_ms_(opts.op_timeout_ms),
      comm_(comm),
      stream_(stream),
      scratch_(std::make_unique<Scratch>()) {}

NcclCollectives::~NcclCollectives() {
  std::lock_guard<std::mutex> lock(call_mu_);
  if (comm_) {
    DeviceGuard dev(device_);
    if (outstanding_.load() || (spent_.load() && !revoked_.load())) {
      // Work may be running, or the epoch failed and its peers may be gone: a finalize could
      // wait for them, abort cannot.
      ncclCommAbort(comm_);
    } else if (revoked_.load()) {
      ncclCommDestroy(comm_);  // quiescent already; finalize is invalid after revoke
    } else {
      (void)finalize_locked();  // falls back to ncclCommAbort by itself
    }
    comm_ = nullptr;
  }
  release_cuda();
}

// ---------- recovery ----------

Status NcclCollectives::poll_quiescent(ncclComm* comm, int64_t timeout_ms, const char* what) {
  return poll_settled(comm, timeout_ms, nullptr, what, "still in progress");
}

// ncclCommAbort under call_mu_. NCCL documents it as blocking, also for non-blocking communicators.
Status NcclCollectives::abort_locked() {
  if (!comm_) return ok_status();
  DeviceGuard dev(device_);
  ncclResult_t r = ncclCommAbort(comm_);
  comm_ = nullptr;
  destroyed_.store(true);
  outstanding_.store(false);  // abort stops whatever the communicator still ran
  if (!started(r)) return nccl_error(r, "ncclCommAbort", nullptr);
  return ok_status();
}

// The clean end: ncclCommFinalize (non-blocking: polled until quiescent), then ncclCommDestroy,
// which is then local. Falls back to ncclCommAbort on any failure.
Status NcclCollectives::finalize_locked() {
  if (!comm_) return ok_status();
  DeviceGuard dev(device_);
  ncclResult_t r = ncclCommFinalize(comm_);
  Status st = started(r) ? poll_quiescent(comm_, opts_.teardown_timeout_ms, "ncclCommFinalize")
                         : Status(nccl_error(r, "ncclCommFinalize", comm_));
  if (!st) {
    (void)abort_locked();
    return st.error().with_context("fell back to ncclCommAbort");
  }
  r = ncclCommDestroy(comm_);
  comm_ = nullptr;
  destroyed_.store(true);
  if (!started(r)) return nccl_error(r, "ncclCommDestroy", nullptr);
  return ok_status();
}

Status NcclCollectives::revoke() {
  abort("revoked");
  std::lock_guard<std::mutex> lock(call_mu_);
  const std::string what = "revoking epoch '" + prefix_ + "'";
  if (!comm_) return fail(what, ": the communicator is destroyed");
  if (revoked_.load()) return ok_status();
  DeviceGuard dev(device_);
  ncclResult_t r = ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
  if (!started(r)) return nccl_error(r, "ncclCommRevoke", comm_).context(what);
  revoked_.store(true);  // issued: a second revoke would be invalid, finalize too
  if (auto st = poll_quiescent(comm_, opts_.teardown_timeout_ms, "ncclCommRevoke"); !st) return st.error().with_context(what);
  // Quiescent: the stream drains now that NCCL's kernels have quit; confirm it.
  if (auto st = drain_stream(); !st) return st.error().with_context(what + " (after the revoke)");
  outstanding_.store(false);
  return ok_status();
}

// Waits (teardown timeout) until the object's stream is idle, after NCCL was told to stop its work.
Status NcclCollectives::drain_stream() {
  const int64_t deadline = mono_ns() + opts_.teardown_timeout_ms * 1'000'000;
  Backoff backoff;
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream_);
    if (q == cudaSuccess) return ok_status();
    if (q != cudaErrorNotReady) return cuda_error(q, "cudaStreamQuery");
    if (mono_ns() > deadline) return fail("the stream still runs work after ", opts_.teardown_timeout_ms, " ms");
    backoff.pause();
  }
}

Status NcclCollectives::abort_and_destroy() {
  abort("aborted and destroyed");
  std::lock_guard<std::mutex> lock(call_mu_);
  Status st = abort_locked();
  release_cuda();
  if (!st) return st.error().with_context("aborting epoch '" + prefix_ + "'");
  return ok_status();
}

Status NcclCollectives::destroy() {
  abort("destroyed");
  std::lock_guard<std::mutex> lock(call_mu_);
  Status st;
  if (comm_) {
    if (outstanding_.load()) {
      st = abort_locked();
    } else if (revoked_.load()) {
      DeviceGuard dev(device_);
      ncclResult_t r = ncclCommDestroy(comm_);
      comm_ = nullptr;
      destroyed_.store(true);
      if (!started(r)) st = nccl_error(r, "ncclCommDestroy", nullptr);
    } else {
      st = finalize_locked();
    }
  }
  release_cuda();
  if (!st) return st.error().with_context("destroying epoch '" + prefix_ + "'");
  return ok_status();
}

Result<std::unique_ptr<NcclCollectives>> NcclCollectives::shrink(const std::vector<int>& excluded,
                                                                 const std::string& new_prefix, ShrinkMode mode,
                                                                 const std::atomic<bool>* cancel) {
  const std::string what = "shrinking epoch '" + prefix_ + "' without ranks " + list_text(excluded) + " into '" +
                           new_prefix + "'";
  std::vector<int> list = excluded;
  std::sort(list.begin(), list.end());
  if (list.empty()) return fail(what, ": no rank to exclude");
  if (std::adjacent_find(list.begin(), list.end()) != list.end()) return fail(what, ": a rank is listed twice");
  if (list.front() < 0 || list.back() >= size_) return fail(what, ": ranks must be in [0, ", size_, ")");
  if (std::binary_search(list.begin(), list.end(), rank_)) return fail(what, ": this rank is excluded (it must not call shrink)");
  if (new_prefix.empty()) return fail(what, ": a new prefix is required");

  abort("shrunk into '" + new_prefix + "'");
  std::lock_guard<std::mutex> lock(call_mu_);
  if (!comm_) return fail(what, ": the communicator is destroyed");
  DeviceGuard dev(device_);
  int flags = NCCL_SHRINK_DEFAULT;
  if (mode == ShrinkMode::abort_parent || (mode == ShrinkMode::automatic && outstanding_.load() && !revoked_.load())) {
    flags = NCCL_SHRINK_ABORT;  // NCCL stops the parent's work first
  }
  ncclConfig_t config = nonblocking_config();
  ncclComm_t child = nullptr;
  const int64_t t0 = mono_ns();
  ncclResult_t r = ncclCommShrink(comm_, list.data(), int(list.size()), &child, &config, flags);
  if (!started(r)) {
    if (child) ncclCommAbort(child);
    return nccl_error(r, "ncclCommShrink", comm_).context(what);
  }
  // The child handle may appear only when NCCL's background job has built it; until then the
  // parent carries the job's state. Once the child exists, its own state decides.
  const int64_t deadline = t0 + opts_.init_timeout_ms * 1'000'000;
  Status st;
  Backoff backoff;
  for (;;) {
    ncclComm_t c = std::atomic_ref<ncclComm_t>(child).load(std::memory_order_acquire);
    ncclResult_t state = ncclInProgress;
    ncclResult_t q = ncclCommGetAsyncError(c ? c : comm_, &state);
    if (q != ncclSuccess) {
      st = nccl_error(q, "ncclCommGetAsyncError", c ? c : comm_);
      break;
    }
    if (c && state == ncclSuccess) break;
    if (state != ncclInProgress) {
      if (!c && std::atomic_ref<ncclComm_t>(child).load(std::memory_order_acquire)) continue;  // just appeared
      st = state == ncclSuccess ? Status(fail("ncclCommShrink finished without a communicator"))
                                : Status(nccl_error(state, "ncclCommShrink", c ? c : comm_));
      break;
    }
    if (cancel && cancel->load()) {
      st = fail("cancelled");
      break;
    }
    if (mono_ns() > deadline) {
      st = fail("not ready after ", opts_.init_timeout_ms, " ms");
      break;
    }
    backoff.pause();
  }
  if (!st) {
    (void)abort_locked();  // first: it also ends NCCL's background job, which belongs to the parent
    ncclComm_t c = std::atomic_ref<ncclComm_t>(child).load(std::memory_order_acquire);
    if (c) ncclCommAbort(c);
    release_cuda();
    return st.error().with_context(what);
  }
  const double init_ms = since_ms(t0);
  if (flags == NCCL_SHRINK_ABORT && drain_stream().ok()) outstanding_.store(false);  // NCCL stopped the parent's work

  int new_rank = -1, new_size = -1;
  if (ncclCommUserRank(child, &new_rank) != ncclSuccess || ncclCommCount(child, &new_size) != ncclSuccess) {
    ncclCommAbort(child);
    return fail(what, ": cannot read the new communicator's rank and size");
  }
  const int expected_rank = rank_ - int(std::lower_bound(list.begin(), list.end(), rank_) - list.begin());
  if (new_rank != expected_rank || new_size != size_ - int(list.size())) {
    ncclCommAbort(child);
    return fail(what, ": NCCL made this rank ", new_rank, " of ", new_size, ", expected ", expected_rank, " of ",
                size_ - int(list.size()));
  }
  cudaStream_t stream = nullptr;
  if (auto e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    ncclCommAbort(child);
    return cuda_error(e, "cudaStreamCreateWithFlags").context(what);
  }
  NcclOptions o = opts_;
  o.rank = new_rank;
  o.size = new_size;
  o.prefix = new_prefix;
  o.op_timeout_ms = op_timeout_ms_.load();
  std::unique_ptr<NcclCollectives> c(new NcclCollectives(o, child, stream, 0.0, init_ms));
  if (auto st = c->prepare(); !st) {
    c->abort("setting up failed");
    return st.error().with_context(what);
  }
  return c;
}

}  // namespace sal::comm

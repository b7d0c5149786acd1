// nccl_collectives.cpp — see nccl_collectives.h. Every collective runs under run(): it holds
// call_mu_ (so NCCL sees one thread at a time), refuses a spent object, validates, enqueues on the
// object's stream (settle() handles non-blocking NCCL's ncclInProgress), then wait_stream() polls
// until the stream is idle. A failure spends the epoch and remembers whether work may still be
// running on the stream (outstanding_), which decides how the communicator must be torn down.
#include "comm/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "comm/store_client.h"
#include "core/clock.h"

namespace sal::comm {

namespace {

using ms = std::chrono::milliseconds;

constexpr uint64_t kSummaryMagic = 0x53414C4E43434C31ull;  // "SALNCCL1"
constexpr int64_t kIdSliceMs = 250;                          // store waits for the id, per slice

// One peer's view of a point-to-point exchange, sent to that peer before any payload.
struct Summary {
  uint64_t magic = kSummaryMagic;
  uint64_t n_to = 0;        // messages this rank sends to the peer
  uint64_t n_from = 0;      // messages this rank expects from the peer
  uint64_t bytes_to = 0;
  uint64_t bytes_from = 0;
  uint64_t hash_to = 0;     // FNV-1a over the (tag, bytes) list in matching order
  uint64_t hash_from = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(Summary) == 64);

uint64_t fnv_add(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 1099511628211ull;
  return h;
}
constexpr uint64_t kFnvStart = 1469598103934665603ull;

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

Error nccl_error(ncclResult_t r, const char* call, ncclComm_t comm) {
  return Error(std::string(call) + ": " + nccl_text(r, comm), int(r));
}

Error cuda_error(cudaError_t e, const char* call) {
  return Error(std::string(call) + ": " + cudaGetErrorString(e), int(e));
}

bool started(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

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

double since_ms(int64_t t0_ns) { return double(mono_ns() - t0_ns) / 1e6; }

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;     // every call returns at once; we poll, so abort and timeouts work
  config.splitShare = 0;   // a child never shares resources (or abort flags) with its parent,
  config.shrinkShare = 0;  // so aborting the old epoch cannot touch the new one
  return config;
}

// Polls a communicator being created until it is ready, fails, passes its deadline or is cancelled.
Status poll_ready(ncclComm_t comm, int64_t timeout_ms, const std::atomic<bool>* cancel, const char* what) {
  const int64_t deadline = mono_ns() + timeout_ms * 1'000'000;
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return nccl_error(r, "ncclCommGetAsyncError", comm).context(what);
    if (state == ncclSuccess) return ok_status();
    if (state != ncclInProgress) return nccl_error(state, what, comm);
    if (cancel && cancel->load()) return fail(what, ": cancelled");
    if (mono_ns() > deadline) return fail(what, ": not ready after ", timeout_ms, " ms");
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

  void release(cudaStream_t stream) {
    if (dev) plain ? cudaFree(dev) : cudaFreeAsync(dev, stream);
    PinnedPool::give(host, host_bytes);
    dev = host = nullptr;
    dev_bytes = host_bytes = 0;
  }
  Status ensure(size_t need, cudaStream_t stream) {
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
  template <class T>
  T* host_as(size_t byte_offset = 0) {
    return reinterpret_cast<T*>(static_cast<char*>(host) + byte_offset);
  }
  template <class T>
  T* dev_as(size_t byte_offset = 0) {
    return reinterpret_cast<T*>(static_cast<char*>(dev) + byte_offset);
  }
};

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
  if (auto st = poll_ready(comm, opts.init_timeout_ms, opts.cancel, "ncclCommInitRankConfig"); !st) {
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

// ---------- point to point ----------

Status NcclCollectives::send(int peer, const void* data, size_t bytes, uint32_t tag) {
  return exchange({SendSpec{peer, data, bytes, tag}}, {});
}

Status NcclCollectives::recv(int peer, void* data, size_t bytes, uint32_t tag) {
  return exchange({}, {RecvSpec{peer, data, bytes, tag}});
}

// NCCL has no tags: messages between two ranks match in posting order. Both sides therefore post
// each peer's messages sorted by (tag, position), which pairs them exactly as tag-then-order
// matching would whenever both sides name the same (tag, bytes) lists — which the summaries check
// first. Empty messages move nothing and are skipped on both sides alike.
Status NcclCollectives::exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) {
  size_t sent = 0, received = 0;
  std::string problem;
  auto check_peer = [&](int peer) {
    if (peer < 0 || peer >= size_) problem = "peer " + std::to_string(peer) + " out of range";
    else if (peer == rank_) problem = "peer " + std::to_string(peer) + " is this rank";
  };
  for (const auto& s : sends) {
    check_peer(s.peer);
    if (s.bytes > 0 && !s.data) problem = "null send buffer";
    sent += s.bytes;
  }
  for (const auto& r : recvs) {
    check_peer(r.peer);
    if (r.bytes > 0 && !r.data) problem = "null receive buffer";
    received += r.bytes;
  }
  std::string what;
  if (sends.size() == 1 && recvs.empty()) {
    what = "send of " + std::to_string(sent) + " bytes to rank " + std::to_string(sends[0].peer) + " (tag " +
           std::to_string(sends[0].tag) + ")";
  } else if (recvs.size() == 1 && sends.empty()) {
    what = "recv of " + std::to_string(received) + " bytes from rank " + std::to_string(recvs[0].peer) + " (tag " +
           std::to_string(recvs[0].tag) + ")";
  } else {
    what = "exchange of " + std::to_string(sends.size()) + " sends (" + std::to_string(sent) + " bytes) and " +
           std::to_string(recvs.size()) + " receives (" + std::to_string(received) + " bytes)";
  }
  return run(what, [&]() -> Status {
    if (!problem.empty()) return fail(problem);
    // Per peer, the positions of its sends and receives in matching order.
    std::map<int, std::pair<std::vector<size_t>, std::vector<size_t>>> peers;
    for (size_t i = 0; i < sends.size(); ++i) peers[sends[i].peer].first.push_back(i);
    for (size_t i = 0; i < recvs.size(); ++i) peers[recvs[i].peer].second.push_back(i);
    if (peers.empty()) return ok_status();
    for (auto& [peer, lists] : peers) {
      std::stable_sort(lists.first.begin(), lists.first.end(), [&](size_t a, size_t b) { return sends[a].tag < sends[b].tag; });
      std::stable_sort(lists.second.begin(), lists.second.end(), [&](size_t a, size_t b) { return recvs[a].tag < recvs[b].tag; });
    }
    if (opts_.verify_sizes) {
      const size_t k = peers.size();
      SAL_TRY(scratch_->ensure(2 * k * sizeof(Summary), stream_));
      Summary* out = scratch_->host_as<Summary>();
      Summary* in = scratch_->host_as<Summary>(k * sizeof(Summary));
      size_t j = 0;
      for (const auto& [peer, lists] : peers) {
        Summary s;
        s.hash_to = s.hash_from = kFnvStart;
        for (size_t i : lists.first) {
          s.n_to++;
          s.bytes_to += sends[i].bytes;
          s.hash_to = fnv_add(fnv_add(s.hash_to, sends[i].tag), sends[i].bytes);
        }
        for (size_t i : lists.second) {
          s.n_from++;
          s.bytes_from += recvs[i].bytes;
          s.hash_from = fnv_add(fnv_add(s.hash_from, recvs[i].tag), recvs[i].bytes);
        }
        out[j] = s;
        std::memset(static_cast<void*>(&in[j]), 0, sizeof(Summary));
        ++j;
      }
      enqueued_ = true;
      if (auto e = cudaMemcpyAsync(scratch_->dev, out, k * sizeof(Summary), cudaMemcpyHostToDevice, stream_);
          e != cudaSuccess) {
        return cuda_error(e, "cudaMemcpyAsync (summaries)");
      }
      ncclResult_t first = ncclGroupStart();
      j = 0;
      for (const auto& entry : peers) {
        const int peer = entry.first;
        if (first == ncclSuccess) {
          first = ncclSend(scratch_->dev_as<char>(j * sizeof(Summary)), sizeof(Summary), ncclUint8, peer, comm_, stream_);
        }
        if (first == ncclSuccess) {
          first = ncclRecv(scratch_->dev_as<char>((k + j) * sizeof(Summary)), sizeof(Summary), ncclUint8, peer, comm_,
                           stream_);
        }
        ++j;
      }
      ncclResult_t end = ncclGroupEnd();
      if (first != ncclSuccess) return nccl_error(first, "ncclSend/ncclRecv (summaries)", comm_);
      SAL_TRY(settle(end, "ncclGroupEnd (summaries)"));
      if (auto e = cudaMemcpyAsync(in, scratch_->dev_as<char>(k * sizeof(Summary)), k * sizeof(Summary),
                                   cudaMemcpyDeviceToHost, stream_);
          e != cudaSuccess) {
        return cuda_error(e, "cudaMemcpyAsync (summaries)");
      }
      SAL_TRY(wait_stream("the exchange of message summaries"));
      j = 0;
      for (const auto& entry : peers) {
        const int peer = entry.first;
        const Summary& mine = out[j];
        const Summary& theirs = in[j];
        ++j;
        if (theirs.magic != kSummaryMagic) return fail("rank ", peer, " sent a malformed message summary");
        if (theirs.n_to != mine.n_from || theirs.bytes_to != mine.bytes_from || theirs.hash_to != mine.hash_from) {
          return fail("rank ", peer, " sends ", theirs.n_to, " message(s), ", theirs.bytes_to, " bytes, to this rank, which expects ",
                      mine.n_from, " message(s), ", mine.bytes_from, " bytes",
                      theirs.n_to == mine.n_from && theirs.bytes_to == mine.bytes_from ? " (other tags or sizes)" : "");
        }
        if (theirs.n_from != mine.n_to || theirs.bytes_from != mine.bytes_to || theirs.hash_from != mine.hash_to) {
          return fail("rank ", peer, " expects ", theirs.n_from, " message(s), ", theirs.bytes_from,
                      " bytes, from this rank, which sends ", mine.n_to, " message(s), ", mine.bytes_to, " bytes",
                      theirs.n_from == mine.n_to && theirs.bytes_from == mine.bytes_to ? " (other tags or sizes)" : "");
        }
      }
    }
    bool any = false;
    for (const auto& s : sends) any = any || s.bytes > 0;
    for (const auto& r : recvs) any = any || r.bytes > 0;
    if (!any) return ok_status();
    enqueued_ = true;
    ncclResult_t first = ncclGroupStart();
    for (const auto& [peer, lists] : peers) {
      for (size_t i : lists.first) {
        if (first == ncclSuccess && sends[i].bytes > 0) {
          first = ncclSend(sends[i].data, sends[i].bytes, ncclUint8, peer, comm_, stream_);
        }
      }
      for (size_t i : lists.second) {
        if (first == ncclSuccess && recvs[i].bytes > 0) {
          first = ncclRecv(recvs[i].data, recvs[i].bytes, ncclUint8, peer, comm_, stream_);
        }
      }
    }
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess) return nccl_error(first, "ncclSend/ncclRecv", comm_);
    SAL_TRY(settle(end, "ncclGroupEnd (exchange)"));
    return wait_stream("the point-to-point transfers");
  });
}

// ---------- recovery ----------

Status NcclCollectives::poll_quiescent(ncclComm* comm, int64_t timeout_ms, const char* what) {
  const int64_t deadline = mono_ns() + timeout_ms * 1'000'000;
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return nccl_error(r, "ncclCommGetAsyncError", comm).context(what);
    if (state == ncclSuccess) return ok_status();
    if (state != ncclInProgress) return nccl_error(state, what, comm);
    if (mono_ns() > deadline) return fail(what, ": still in progress after ", timeout_ms, " ms");
    backoff.pause();
  }
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

// nccl_collectives.h — Collectives (collectives.h) over NCCL: the data plane of the GPU worker, one
// rank per GPU, one NCCL communicator per plan epoch. Every buffer is a DEVICE pointer (memory on
// this object's GPU): the GPU worker passes its device buffers, nothing is staged through the host.
//
// Creation (connect_nccl): rank 0 makes the ncclUniqueId and publishes it in the controller's store
// under "<prefix>/nccl-id" (so StoreServer::erase_prefix("<prefix>/") drops it with the epoch); the
// other ranks wait for it in short slices, so a cancel flag or StoreClient::interrupt() ends the wait.
// The communicator is created NON-BLOCKING (ncclConfig_t.blocking = 0) and polled with
// ncclCommGetAsyncError until it leaves ncclInProgress, under a deadline; a cancelled or late init is
// ended with ncclCommAbort.
//
// Operations: allreduce_sum (ncclAllReduce, in place), allgather (ncclAllGather of bytes), alltoallv
// (ncclSend/ncclRecv per peer inside one ncclGroupStart/End; the self block is a device copy),
// send/recv/exchange (grouped ncclSend/ncclRecv), barrier (a 1-element all-reduce). All run on the
// object's own CUDA stream, and each call returns only when its work on that stream is complete: it
// waits by polling cudaStreamQuery and ncclCommGetAsyncError, never by blocking in CUDA or NCCL, so
// abort() from another thread, the op timeout and NCCL's asynchronous errors all end a hung wait.
// Sizes are checked before data moves (alltoallv: an allgather of every rank's counts; p2p: one
// 64-byte summary per peer and direction), because NCCL given mismatched sizes hangs or corrupts:
// a mismatch fails both ranks concerned with a message naming the sizes (a third rank waiting on
// one of them fails by its op timeout, or by the controller's abort). NCCL has no tags: messages
// to one peer are posted sorted by (tag, position) on both sides, which pairs them as tag-then-order
// matching would. An exchange() naming a peer that does not name this rank back waits for the op
// timeout. allgather is in place only the way NCCL allows it (in == out + rank * bytes).
// The scratch a call needs is allocated when the communicator is made (device memory
// stream-ordered, pinned host staging from a process-wide pool that is never freed), so no call
// allocates or frees memory: cudaFree and cudaFreeHost may synchronise the device, which would hang
// behind a collective stuck on another communicator.
//
// Determinism: every rank gets the same bits from an all-reduce (NCCL reduces each chunk once and
// broadcasts it). Run to run the bits are the same as long as NCCL picks the same algorithm and
// protocol, which it does for the same sizes, topology, NCCL version and NCCL_* environment (set
// NCCL_ALGO / NCCL_PROTO to pin them; NVLS / CollNet in-switch reductions are not order-fixed).
//
// Failure and recovery, for the GPU agent:
// - abort(why), from any thread, touches no NCCL state (NCCL is not thread-safe): it marks the
//   epoch over, and the call in flight sees the mark at its next poll (microseconds) and returns.
// - A call that returned an error (aborted, timed out, NCCL error) may leave its kernel running on
//   the stream, still reading and writing the caller's device buffers (outstanding_work() is then
//   true). Do not free or reuse those buffers — cudaFree would block behind the hung kernel — until
//   one of revoke(), abort_and_destroy() or shrink() has stopped it.
// - revoke(): ncclCommRevoke — stops outstanding work, keeps the communicator as a parent for
//   shrink(). abort_and_destroy(): ncclCommAbort. destroy(): the clean path (ncclCommFinalize,
//   then ncclCommDestroy), falling back to ncclCommAbort past the teardown timeout.
// - shrink(excluded): ncclCommShrink into a new object over the surviving ranks (renumbered in
//   order); every survivor calls it with the same list, the excluded ranks must not. It uses
//   NCCL_SHRINK_DEFAULT when the parent has no outstanding work (healthy, or revoked) and
//   NCCL_SHRINK_ABORT otherwise (NCCL then stops the parent's work first). The other way back is a
//   fresh connect_nccl under a new prefix; bench_nccl measures which is faster.
// - The destructor aborts a communicator that is spent or may have outstanding work, and destroys a
//   healthy one cleanly.
//
// NCCL refuses two ranks of one communicator on the same GPU, so a single-GPU machine can only form
// 1-rank NCCL communicators; several workers sharing one GPU must use the Gloo path
// (gloo_collectives.h) with host staging instead.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "core/result.h"

// NCCL and CUDA handle types, declared here so this header needs neither nccl.h nor the CUDA headers.
struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace sal::comm {

class StoreClient;

struct NcclOptions {
  int rank = 0;
  int size = 1;
  int device = 0;                        // CUDA ordinal of this rank's GPU (one rank per GPU)
  std::string prefix;                    // one per plan epoch, e.g. "epoch-7"; the id is "<prefix>/nccl-id"
  int64_t rendezvous_timeout_ms = 30000; // ranks > 0: how long to wait for rank 0's id
  int64_t init_timeout_ms = 60000;       // ncclCommInitRankConfig (or shrink) until ready
  int64_t op_timeout_ms = 30000;         // the per-wait backstop of every collective
  int64_t teardown_timeout_ms = 10000;   // revoke / finalize until quiescent (then abort)
  // Check sizes before data moves (alltoallv: a small allgather of all counts, O(size^2) values;
  // p2p: a summary per peer). Must be the same on every rank.
  bool verify_sizes = true;
  // Optional: set from another thread to stop a connect (or shrink) in progress; it is polled
  // between store slices and init polls. Must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
};

class NcclCollectives final : public Collectives {
 public:
  ~NcclCollectives() override;
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Device pointers, all of them.
  Status allreduce_sum(float* data, size_t n) override;
  Status allreduce_sum(double* data, size_t n) override;
  Status allgather(const void* in, size_t bytes, void* out) override;
  Status alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                   const std::vector<int64_t>& recv_counts) override;
  Status send(int peer, const void* data, size_t bytes, uint32_t tag) override;
  Status recv(int peer, void* data, size_t bytes, uint32_t tag) override;
  Status exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) override;
  Status barrier() override;
  void abort(const std::string& why) override;
  bool aborted() const override { return spent_.load(); }
  void set_op_timeout(std::chrono::milliseconds t) override;
  std::chrono::milliseconds op_timeout() const override { return std::chrono::milliseconds(op_timeout_ms_.load()); }

  // Makes every later call start only after the work already enqueued on `producer` (the worker's
  // compute stream) at the time of the call: an event is recorded there and this object's stream
  // waits for it. Without it, finish the kernels that produce a call's input before the call.
  // Null (the default) disables it.
  void set_producer_stream(CUstream_st* producer);

  // ---- recovery (the GPU agent). Each first calls abort(), so a call blocked on another thread
  // returns, then waits for it. Not to be called concurrently with each other. ----

  // ncclCommRevoke, polled until the communicator is quiescent and the stream idle (teardown
  // timeout). Afterwards the communicator only serves shrink() or teardown. Idempotent.
  Status revoke();
  // ncclCommAbort: frees the communicator and stops anything it runs. Idempotent.
  Status abort_and_destroy();
  // The clean end: ncclCommFinalize polled until quiescent, then ncclCommDestroy (after a revoke:
  // ncclCommDestroy alone). With outstanding work, or past the teardown timeout, ncclCommAbort
  // instead. Idempotent.
  Status destroy();
  // ncclCommShrink without `excluded` (ranks of this communicator, not containing this rank, at
  // least one): the new object holds the survivors renumbered in order, as a new epoch named
  // `new_prefix` (for messages), with this object's options. Waits up to the init timeout, or until
  // *cancel turns true. This object is spent afterwards; destroy or abort it once the new one exists.
  enum class ShrinkMode {
    automatic,     // NCCL_SHRINK_ABORT when work may be outstanding (and no revoke), else DEFAULT
    plain,         // NCCL_SHRINK_DEFAULT: the parent has no work in flight, or was revoked
    abort_parent,  // NCCL_SHRINK_ABORT: NCCL stops the parent's work first
  };
  Result<std::unique_ptr<NcclCollectives>> shrink(const std::vector<int>& excluded, const std::string& new_prefix,
                                                  ShrinkMode mode = ShrinkMode::automatic,
                                                  const std::atomic<bool>* cancel = nullptr);

  // ---- diagnostics ----
  int device() const { return device_; }
  const std::string& prefix() const { return prefix_; }
  double rendezvous_ms() const { return rendezvous_ms_; }  // publishing / waiting for the id
  double init_ms() const { return init_ms_; }              // init (or shrink) call until ready
  bool revoked() const;
  bool destroyed() const;
  // True when a failed call may have left work on the stream (see the file comment).
  bool outstanding_work() const;

 private:
  friend Result<std::unique_ptr<NcclCollectives>> connect_nccl_object(const NcclOptions& opts, StoreClient& store);
  NcclCollectives(const NcclOptions& opts, ncclComm* comm, CUstream_st* stream, double rendezvous_ms, double init_ms);

  struct Scratch;  // device scratch + pinned host staging (nccl_internal.h)

  // Runs one collective: refuses a spent object, holds call_mu_, makes the GPU current, and on an
  // error spends the epoch and prefixes the message with `what`.
  Status run(const std::string& what, const std::function<Status()>& body);
  Status order_after_producer();
  // After an NCCL call: its result; on ncclInProgress, polls until the work is enqueued.
  Status settle(int nccl_result, const char* call);
  // Polls until the stream is idle: ok, or an error (abort, op timeout, CUDA or NCCL error).
  Status wait_stream(const char* stage);
  Status check_counts(const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts);
  template <class T>
  Status allreduce_impl(T* data, size_t n, const char* type);
  void spend(const std::string& reason);
  std::string reason() const;
  Status poll_quiescent(ncclComm* comm, int64_t timeout_ms, const char* what);
  Status drain_stream();
  Status abort_locked();
  Status finalize_locked();
  size_t scratch_need() const;
  Status prepare();
  void release_cuda();

  const int rank_;
  const int size_;
  const int device_;
  const std::string prefix_;
  const NcclOptions opts_;  // with cancel cleared
  const double rendezvous_ms_;
  const double init_ms_;
  std::atomic<int64_t> op_timeout_ms_;

  std::atomic<bool> spent_{false};
  std::atomic<bool> outstanding_{false};
  std::atomic<bool> revoked_{false};
  std::atomic<bool> destroyed_{false};
  mutable std::mutex reason_mu_;  // guards reason_
  std::string reason_;

  // Everything below is used under call_mu_ only: collectives and recovery hold it for their whole
  // duration, so NCCL and the stream see one thread at a time.
  mutable std::mutex call_mu_;
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  CUstream_st* producer_ = nullptr;
  CUevent_st* event_ = nullptr;
  std::unique_ptr<Scratch> scratch_;
  bool enqueued_ = false;  // the call in flight has put work on the stream
};

// Connects rank opts.rank of opts.size on GPU opts.device through the store, under opts.prefix.
// Sets the calling thread's current CUDA device to opts.device.
Result<std::unique_ptr<NcclCollectives>> connect_nccl_object(const NcclOptions& opts, StoreClient& store);
Result<std::unique_ptr<Collectives>> connect_nccl(const NcclOptions& opts, StoreClient& store);

// The NCCL version this binary runs with (ncclGetVersion), e.g. 22809; and as text "2.28.9".
int nccl_version();
std::string nccl_version_text();

}  // namespace sal::comm

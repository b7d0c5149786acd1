// collectives.h — the data plane as the training workers see it: one interface for the collectives
// of one plan epoch, implemented over Gloo/TCP for CPUs (gloo_collectives.h) and later over NCCL.
//
// Contract, for every implementation:
// - One object per plan epoch and communicator. Collectives are called from one thread at a time,
//   in the same order on every rank, with matching sizes (allreduce: the same n everywhere;
//   alltoallv: my send_counts[j] == rank j's recv_counts[me]). Results are bit-identical run to
//   run for the same ranks and inputs.
// - Errors come back as Status with what was being done ("allreduce of 1048576 floats: ...").
//   After any error the object is spent: the epoch is over, every later call fails fast, and the
//   caller discards the step and builds a new object (connect_gloo with a new prefix).
// - abort(why) may be called from any thread, also while a collective blocks: it makes blocked
//   and later calls return an error quickly and never blocks for long. It must not race the
//   object's destruction (keep the object alive, e.g. in a shared_ptr, while a control thread may
//   call abort).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace gloo::rendezvous {
class Store;
}
namespace gloo::transport {
class Device;
}

namespace sal::comm {

// One point-to-point message of an exchange(): `bytes` from/to `peer`, matched by tag (and order
// within the same peer and tag). Both sides must agree on bytes; a mismatch fails both sides.
struct SendSpec {
  int peer = 0;
  const void* data = nullptr;
  size_t bytes = 0;
  uint32_t tag = 0;
};
struct RecvSpec {
  int peer = 0;
  void* data = nullptr;
  size_t bytes = 0;
  uint32_t tag = 0;
};

// What a transport sends ahead of each exchange() payload, so that the receiver checks that both
// sides agree on the message (Gloo and the shared-memory plane send it; NCCL's sizes are fixed).
struct ExchangeHeader {
  static constexpr uint32_t kMagic = 0x53414C50;  // "SALP"
  uint32_t magic = kMagic;
  uint32_t tag = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(ExchangeHeader) == 16);

// What an exchange() call asks, checked before anything moves: `what` names it for errors ("send
// of 4096 bytes to rank 2 (tag 5)", "exchange of 3 sends (...) and 2 receives (...)"), `problem` is
// empty or the first rule broken (a peer out of range or this rank, a null buffer with bytes).
// Every implementation's exchange() starts with it, so their errors read the same.
struct ExchangeCheck {
  std::string what, problem;
};
ExchangeCheck check_exchange(int rank, int size, const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs);

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place; every rank gets the same sum, bit for bit.
  virtual Status allreduce_sum(float* data, size_t n) = 0;
  virtual Status allreduce_sum(double* data, size_t n) = 0;
  // `out` holds size() * bytes, rank r's `in` at offset r * bytes.
  virtual Status allgather(const void* in, size_t bytes, void* out) = 0;
  // Variable all-to-all: send_counts[i] floats go to rank i from `send` (packed in rank order),
  // recv_counts[i] floats come from rank i into `recv` (packed in rank order). Zeros allowed.
  virtual Status alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                           const std::vector<int64_t>& recv_counts) = 0;
  // Point to point (expert state migration). send() returns when the peer has received the data;
  // two ranks that send to each other at once must use exchange() instead.
  virtual Status send(int peer, const void* data, size_t bytes, uint32_t tag) = 0;
  virtual Status recv(int peer, void* data, size_t bytes, uint32_t tag) = 0;
  // Posts every send and receive at once, then waits for all of them: no ordering deadlock.
  virtual Status exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) = 0;
  virtual Status barrier() = 0;

  // Thread-safe, callable from another thread while a collective blocks: makes every blocked or
  // later call on this object return an error quickly (the epoch is over). Never blocks for long.
  virtual void abort(const std::string& why) = 0;
  // True once abort() was called or a call failed: the epoch is over.
  virtual bool aborted() const = 0;

  // The longest any one wait inside a call may take before the call fails (the backstop when
  // nothing aborts). Per object; ScopedOpTimeout changes it for a few calls. Must be > 0.
  virtual void set_op_timeout(std::chrono::milliseconds t) = 0;
  virtual std::chrono::milliseconds op_timeout() const = 0;

  // Whether narrow() can work: a plane whose ranks all share this host's memory (shm_plane.h).
  virtual bool narrows() const { return false; }
  // This plane as one over `members` only (ranks of this plane, in the order they take in the new
  // one; this rank among them), a new epoch named `prefix`; this object is spent. Every member
  // narrows alike, at the same point: after calls that completed on every member (none of their
  // messages is still on its way), never in the middle of one, and holding the object alone (no
  // abort() from another thread meanwhile). A rank left out may be dead. Where narrows() is false,
  // an error.
  virtual Result<std::unique_ptr<Collectives>> narrow(std::vector<int> members, std::string prefix);
};

// Sets an object's op timeout for a scope: { ScopedOpTimeout t(c, 200ms); c.barrier(); }
class ScopedOpTimeout {
 public:
  ScopedOpTimeout(Collectives& c, std::chrono::milliseconds t) : c_(c), saved_(c.op_timeout()) { c_.set_op_timeout(t); }
  ~ScopedOpTimeout() { c_.set_op_timeout(saved_); }
  ScopedOpTimeout(const ScopedOpTimeout&) = delete;
  ScopedOpTimeout& operator=(const ScopedOpTimeout&) = delete;

 private:
  Collectives& c_;
  std::chrono::milliseconds saved_;
};

struct GlooOptions {
  int rank = 0;
  int size = 1;
  std::string prefix;                   // one per plan epoch and communicator, e.g. "epoch-7"
  std::string hostname = "127.0.0.1";   // this worker's data-plane address
  int64_t connect_timeout_ms = 5000;    // a pair's connect may take up to 5x this
  int64_t rendezvous_timeout_ms = 0;    // store waits for the peers' keys (interruptible); 0: connect_timeout_ms
  int64_t op_timeout_ms = 30000;        // the per-wait backstop of every collective
  // Before each alltoallv, all-gather every rank's counts and check they match (a mismatch would
  // otherwise kill the process inside Gloo's I/O thread). Costs one small allgather. Must be the
  // same on every rank.
  bool verify_counts = true;
  // When every rank of the epoch is on this host, move the data over UCX shared memory instead of
  // Gloo's TCP pairs (shm_plane.h; the Gloo context stays connected beside it, for the rendezvous,
  // the liveness of the peers and the cascade). Must be the same on every rank.
  bool shared_memory = true;
};

// A TCP device for `hostname`, shared by every epoch's context in this process (one I/O thread).
// Create it after any fork(), never before.
Result<std::shared_ptr<gloo::transport::Device>> gloo_device(const std::string& hostname);

// Connects a full mesh through the store (one Gloo context per plan epoch), under opts.prefix.
// When every rank reported back but a pair was joined to a stranger or a rank's connect failed,
// the ranks connect again together, up to three tries (socket_watch.h).
// The first form uses gloo_device(opts.hostname). Also ignores SIGPIPE process-wide (Gloo writes
// with writev, which would otherwise kill the worker when a peer dies).
Result<std::unique_ptr<Collectives>> connect_gloo(const GlooOptions& opts, gloo::rendezvous::Store& store);
Result<std::unique_ptr<Collectives>> connect_gloo(const GlooOptions& opts, gloo::rendezvous::Store& store,
                                                  std::shared_ptr<gloo::transport::Device> device);

}  // namespace sal::comm

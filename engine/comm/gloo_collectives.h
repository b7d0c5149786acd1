// gloo_collectives.h — the CPU data plane: Collectives over Gloo's TCP transport, or, when every
// rank of the epoch is on this host, over UCX shared memory (shm_plane.h; then the object has no
// Gloo context and no sockets, and every call goes through the plane).
//
// One object = one epoch, connected under one epoch prefix: a gloo::rendezvous::Context, or a
// ShmPlane. Point-to-point messages carry a 16-byte header (tag, size) so a size mismatch is an
// error on both sides instead of a crash inside Gloo's I/O thread (the plane keeps the protocol).
//
// Allgather, allreduce and alltoallv are ours, built on Gloo's point-to-point unbound buffers
// (gloo_direct.cpp): every message of a round is posted at once, so an allgather is one round
// (Gloo's ring takes size-1 rounds, each a hand-off through both ranks' I/O threads) and an
// allreduce two — a reduce-scatter to each chunk's owner, which sums the ranks' parts in rank
// order, then an allgather of the sums (Gloo's ring: 2(size-1)) — or one round for small inputs
// (every rank gathers every part and sums them in rank order). Same traffic as the ring, far fewer
// sequential hops; deterministic, and every rank gets the same bits. Above kDirectMaxRanks ranks
// (messages per rank grow with the ranks) Gloo's ring and alltoallv are used instead.
//
// Abort (reference notes §2.7, §2.9): abort() shuts down this context's TCP sockets at the OS
// level (found by socket_watch.h), so Gloo's I/O thread sees EOF on every pair and fails all
// pending operations — blocked calls return within about a millisecond — and the peers see FIN and
// fail too (the cascade). Gloo does not wake a buffer whose payload is mid-transfer when its pair
// fails (notes §2.5, gap 2); for the buffers this class hands to Gloo (every buffer of the direct
// collectives, p2p) a helper thread repeats abortWaitRecv/abortWaitSend until the call returns.
// Only Gloo's own ring allreduce (more than kDirectMaxRanks ranks) has an internal scratch
// buffer out of reach: caught with a segment mid-transfer it can still wait for the op timeout,
// which stays the backstop.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/collectives.h"
#include "comm/socket_watch.h"

namespace sal::comm {

// Up to this many ranks the collectives are direct (above); beyond, each rank would post a
// message to every other rank per round, and Gloo's ring algorithms take over.
constexpr int kDirectMaxRanks = 64;

class LoopTicker;  // loop_ticker.h
class ShmPlane;    // shm_plane.h

class GlooCollectives final : public Collectives {
 public:
  static Result<std::unique_ptr<GlooCollectives>> connect(const GlooOptions& opts, gloo::rendezvous::Store& store,
                                                          std::shared_ptr<gloo::transport::Device> device);
  ~GlooCollectives() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
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
  bool narrows() const override { return shm_ != nullptr; }
  // Over shared memory only: the plane moves to the new object (ShmPlane::narrow), whose operation
  // tags go on from this one's; this object is spent.
  Result<std::unique_ptr<Collectives>> narrow(std::vector<int> members, std::string prefix) override;

  // Diagnostics: how long connect took, the sockets abort() will shut down (one per peer), and
  // whether the data moves over shared memory.
  double connect_ms() const { return connect_ms_; }
  // How many times the ranks connected the mesh together (more than 1 after a stray connection).
  int connect_attempts() const { return connect_attempts_; }
  bool shared_memory() const { return shm_ != nullptr; }
  const PeerSockets& sockets() const { return sockets_; }
  const std::string& prefix() const { return prefix_; }

 private:
  GlooCollectives(const GlooOptions& opts, std::shared_ptr<gloo::rendezvous::Context> ctx, PeerSockets sockets,
                  double connect_ms, LoopTicker* ticker, std::unique_ptr<ShmPlane> shm, int connect_attempts);

  // Runs one Gloo call: fails fast when spent, turns exceptions into an Error naming `what`, and
  // spends the epoch (shutting the sockets, so peers fail fast too) on any failure.
  Status guarded(const std::string& what, const std::function<void()>& body);
  void spend(const std::string& reason);
  uint32_t next_tag() { return tag_++; }
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer(const void* p, size_t bytes);

  // Buffers handed to Gloo for the call in flight, so abort() can wake their waiters. A Tracker
  // is declared after the options that own the buffers, so it is destroyed (and unregisters
  // them) first.
  class Tracker {
   public:
    Tracker(GlooCollectives* c, std::vector<gloo::transport::UnboundBuffer*> bufs);
    ~Tracker();

   private:
    GlooCollectives* c_;
  };
  void pump();

  template <class T>
  Status allreduce_impl(T* data, size_t n, const char* type);
  Status check_counts(const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts);
  void exchange_body(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs);

  // The direct collectives (gloo_direct.cpp): one or two rounds of messages to every peer at
  // once, on buffers of ours (so abort() reaches every wait), instead of Gloo's rings.
  struct Message {
    int peer = 0;
    size_t offset = 0, bytes = 0;  // within the round's buffer
  };
  // Posts every receive into `into`, then every send from `from` (offsets into them), tagged with
  // the operation's tag, and waits for all of them; a wait that abort() interrupts throws. Empty
  // messages are skipped (both sides know the sizes). Runs inside guarded().
  void round(const void* from, const std::vector<Message>& sends, void* into, const std::vector<Message>& recvs,
             uint32_t tag);
  void direct_allgather(const void* in, size_t bytes, void* out);
  template <class T>
  void direct_allreduce(T* data, size_t n);
  void direct_alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                        const std::vector<int64_t>& recv_counts);

  const int rank_;
  const int size_;
  const std::string prefix_;
  const bool verify_counts_;
  const double connect_ms_;
  const int connect_attempts_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  PeerSockets sockets_;
  LoopTicker* ticker_;  // the device's (loop_ticker.h), for the teardown; may be null
  std::unique_ptr<ShmPlane> shm_;  // the same-host data path (shm_plane.h); null: Gloo's pairs
  std::atomic<int64_t> op_timeout_ms_;
  uint32_t tag_ = 1;

  std::atomic<bool> spent_{false};
  mutable std::mutex mu_;  // guards everything below
  std::string reason_;
  bool aborted_by_call_ = false;
  bool in_call_ = false;
  std::vector<gloo::transport::UnboundBuffer*> inflight_;
  bool pump_stop_ = false;
  std::thread pump_;
};

}  // namespace sal::comm

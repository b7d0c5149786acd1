// shm_plane.h — the data plane of an epoch whose ranks are all on this host: messages over UCX's
// posix shared-memory transport (libucx), waited for by the calling thread itself. No Gloo context,
// no TCP sockets, no I/O thread.
//
// Why: on Gloo's TCP transport every message is a hand-off through both ranks' I/O threads, and
// the I/O thread busy-polls (epoll_wait returns at once) whenever the caller holds the pair's lock —
// measured on 4 workers on 2 cores: 60 000 epoll_wait calls a second per worker, most of the CPU
// in the kernel, and a 8-byte ping-pong at 0.6 ms round trip (0.2 ms of CPU per side). Over UCX
// shared memory the same ping-pong takes 35 µs and 9 µs of CPU: the sender writes into the
// receiver's shared queue and signals it, and the receiver's own thread wakes, progresses the UCX
// worker and finds the data. And an epoch connects in one store round and a confirmation, instead
// of Gloo's pair-by-pair full mesh.
//
// One UCX worker per epoch (so no message of an abandoned epoch can match a new one), one endpoint
// per peer, tags that carry the kind of message, the sender and the operation's tag. A receive
// reports the length that arrived: a size mismatch is an error on the receiver (a larger message is
// truncated, never written past the buffer), not a crash. On any error the requests still in
// flight are cancelled, and a cancelled receive completes, before the call returns: no late write
// reaches the caller's memory.
//
// Peers that end: a rank that dies is seen through a pidfd of its process (readable the moment it
// exits), so a survivor waiting on it is released at once. A rank that gives up on the epoch (a
// failed call, abort()) sends every peer a one-byte notice; a survivor waiting on it fails when the
// notice arrives, and a call that involves it fails at once — the cascade that shutting TCP
// sockets gave on Gloo. A peer's closure fails a wait only once the worker, progressed to the end,
// still lacks that peer's data: what it sent before it ended is already in the queue.
//
// The rendezvous is collective over the epoch's ranks: each publishes (through the epoch's store)
// its host identity, its pid and a UCX worker address; connect() uses the plane only if every rank
// is on this host and has a worker — otherwise every rank gets null, and the caller connects Gloo.
//
// Endpoints are flushed (their wire-up done) before the plane is used, and the next epoch's worker
// is created in the background meanwhile. A plane's worker outlives it until this process connects
// a newer epoch, so a slower peer can still attach to it (and learn from our notice that we left).
// Every rank of an epoch uses the plane or none: the decision is the same for all, and a rank
// that cannot reach a peer fails its connect (the peer is gone: the epoch is over).
//
// A plane can be narrowed (narrow(): Collectives::narrow) to some of its ranks, say the ones a
// loss left: the same worker, endpoints and mapped queues, the callers' peer i translated to the
// i-th member. Tags keep naming ranks of the plane as connected, so both sides agree.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "core/result.h"

namespace gloo::rendezvous {
class Store;
}

namespace sal::comm {

class ShmPlane {
 public:
  // What a message is, in its tag (so rounds, point-to-point and notices never match each other).
  enum class Kind : uint8_t { round = 1, p2p = 2, p2p_header = 3, notice = 4, p2p_ready = 5 };

  struct Worker;  // one epoch's UCX worker and endpoints (shm_plane.cpp)

  // Reads every rank's record (published first by each) and decides — every rank alike — whether
  // the epoch is on one host: then connects the plane; else returns null. Errors: the store, or a
  // peer that could not be reached (the epoch is over: a peer left already).
  static Result<std::unique_ptr<ShmPlane>> connect(int rank, int size, gloo::rendezvous::Store& epoch_store,
                                                   int64_t timeout_ms);
  ~ShmPlane();
  ShmPlane(const ShmPlane&) = delete;
  ShmPlane& operator=(const ShmPlane&) = delete;

  // Posts every receive and send (tags are `kind` + sender + spec.tag), waits for all of them.
  // Throws std::runtime_error (naming the rank and the sizes, a peer that ended, the interruption,
  // or the timeout) after cancelling whatever is still in flight, and gives up on the epoch (tells
  // the peers). Fails at once when a peer it involves has ended.
  void transfer(Kind kind, const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs,
                std::chrono::milliseconds timeout);
  // Collectives::exchange: a header (tag, size) ahead of each payload; a receive whose header
  // disagrees fails, naming both sizes, and its sender fails too (see shm_plane.cpp).
  void exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs,
                std::chrono::milliseconds timeout);

  // Thread-safe, never blocks for long: ends this rank's part in the epoch. The peers get the
  // notice now if no call is in flight, else the call in flight wakes, sends it and throws.
  void give_up();

  // From now on peer i of every call is rank members[i] of the plane as connected (Collectives::
  // narrow): a plane over some of its ranks, the others left out (dead, or never reached again).
  // Returns this rank's place among them. Not while a call is in flight; once.
  Result<int> narrow(const std::vector<int>& members);

 private:
  // A request in flight: a receive has its spec and where its length lands.
  struct Pending {
    void* request = nullptr;
    const RecvSpec* recv = nullptr;
    size_t* length = nullptr;
    int peer = -1;
  };
  using Batch = std::vector<Pending>;
  struct Record;

  ShmPlane(int rank, std::unique_ptr<Worker> w, std::vector<int> pidfds);
  static Result<std::unique_ptr<Worker>> take_worker();
  static void prepare_spare();
  static void retire_old_workers();  // destroys the workers of epochs left before this one
  void flush(std::chrono::milliseconds timeout);
  void listen_for_notices();
  void post_recv(Batch& b, Kind kind, const RecvSpec& r, size_t* length);
  void post_send(Batch& b, Kind kind, const SendSpec& s, bool sync);
  void run(Batch& b, std::chrono::milliseconds timeout);  // wait(); on failure notices, then rethrow
  void wait(Batch& b, std::chrono::milliseconds timeout);
  bool ended(int peer);          // it died or gave up
  std::string ended_text(int peer) const;
  void check_peers(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs);
  void mapped_since();           // after a call: the segments mapped by it, populated (first calls only)
  template <class Spec>
  std::vector<Spec> connected(const std::vector<Spec>& specs) const;  // peers as ranks of the plane connected
  void send_notices();           // holding mu_
  [[noreturn]] void abandon(Batch& b, const std::string& why);  // cancels the batch, then throws
  void cancel(Batch& b);

  int rank_;
  std::unique_ptr<Worker> w_;
  std::vector<int> pidfds_;               // per rank: its process (-1: this rank)
  std::vector<char> gave_up_;             // per rank: its notice arrived
  std::mutex mu_;                         // held by the call in flight (and by give_up's notices)
  std::atomic<bool> interrupted_{false};  // give_up() came while a call was in flight
  bool noticed_ = false;                  // our notices went out (under mu_)
  void* notice_request_ = nullptr;        // the standing receive of peers' notices
  char notice_buf_ = 0;
  uint64_t notice_from_ = 0;              // the tag it received (names the sender)
  int calls_ = 0;                         // calls completed, counted up to the last that prefaults
  std::vector<int> members_;              // narrow()'s: the callers' peer i is rank members_[i]; empty: all
};

}  // namespace sal::comm

// shm_plane.h — the same-host data path of one plan epoch: messages between workers on one machine
// over UCX's posix shared-memory transport (libucx), waited for by the calling thread itself.
//
// Why: on Gloo's TCP transport every message is a hand-off through both ranks' I/O threads, and
// the I/O thread busy-polls (epoll_wait returns at once) whenever the caller holds the pair's lock —
// measured on 4 workers on 2 cores: 60 000 epoll_wait calls a second per worker, most of the CPU
// in the kernel, and a 8-byte ping-pong at 0.6 ms round trip (0.2 ms of CPU per side). Over UCX
// shared memory the same ping-pong takes 35 µs and 9 µs of CPU: the sender writes into the
// receiver's shared queue and signals it, and the receiver's own thread wakes, progresses the UCX
// worker and finds the data — no I/O thread, no lock between threads.
//
// One UCX worker per epoch (so no message of an abandoned epoch can match a new one), one endpoint
// per peer, tags that carry the kind of message, the sender and the operation's tag. A receive
// reports the length that arrived: a size mismatch is an error on the receiver (a larger message is
// truncated, never written past the buffer), not a crash. A wait polls the worker's event fd, the
// wake-up of interrupt(), and the epoch's TCP sockets (the Gloo context stays connected beside the
// plane): a peer that dies closes its sockets, so a survivor waiting on it is released at once, and
// a rank that fails shuts its own sockets, which releases its peers — the same cascade as on Gloo.
// On any error the requests still in flight are cancelled, and complete, before the call returns:
// no late write reaches the caller's memory.
//
// connect() is collective over the epoch's ranks: each publishes (through the epoch's store) its
// host identity and a UCX worker address; the plane is used only if every rank is on this host and
// has a worker — otherwise every rank gets null and stays on Gloo. A second round through the store
// says each rank has its endpoints, so no rank tears its worker down while a peer still connects.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
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
  // What a message is, in its tag (so rounds and point-to-point never match each other).
  enum class Kind : uint8_t { round = 1, p2p = 2, p2p_header = 3 };

  // peer_fds[r]: a socket to rank r (shut or closed when r is gone; -1 for this rank).
  static Result<std::unique_ptr<ShmPlane>> connect(int rank, int size, gloo::rendezvous::Store& epoch_store,
                                                   std::vector<int> peer_fds, int64_t timeout_ms);
  ~ShmPlane();
  ShmPlane(const ShmPlane&) = delete;
  ShmPlane& operator=(const ShmPlane&) = delete;

  // Posts every receive and send (tags are `kind` + sender + spec.tag), waits for all of them.
  // Throws std::runtime_error (naming the rank and the sizes, a closed peer, the interruption, or
  // the timeout) after cancelling whatever is still in flight. Fails at once when the socket of a
  // peer it involves is already closed, and while waiting when the socket of a peer it still
  // waits on closes (a peer whose part is done may fail without failing this call, as on Gloo).
  void transfer(Kind kind, const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs,
                std::chrono::milliseconds timeout);
  // Collectives::exchange: a header (tag, size) ahead of each payload; a receive whose header
  // disagrees fails, naming both sizes, and its sender fails too (see shm_plane.cpp).
  void exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs,
                std::chrono::milliseconds timeout);

  // Thread-safe: a wait in progress (or the next) throws "interrupted". Never blocks.
  void interrupt();

 private:
  struct Worker;
  // A request in flight: a receive has its spec and where its length lands.
  struct Pending {
    void* request = nullptr;
    const RecvSpec* recv = nullptr;
    size_t* length = nullptr;
    int peer = -1;
  };
  using Batch = std::vector<Pending>;

  ShmPlane(int rank, std::unique_ptr<Worker> w, std::vector<int> peer_fds);
  static bool flush_all(Worker& w, std::chrono::milliseconds timeout);
  void post_recv(Batch& b, Kind kind, const RecvSpec& r, size_t* length);
  void post_send(Batch& b, Kind kind, const SendSpec& s, bool sync);
  void wait(Batch& b, std::chrono::milliseconds timeout);
  bool closed(int peer) const;  // its socket is shut or closed
  void check_peers(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) const;
  [[noreturn]] void abandon(Batch& b, const std::string& why);  // cancels the batch, then throws
  void cancel(Batch& b);

  int rank_;
  std::unique_ptr<Worker> w_;
  std::vector<int> peer_fds_;
  std::atomic<bool> interrupted_{false};
};

}  // namespace sal::comm

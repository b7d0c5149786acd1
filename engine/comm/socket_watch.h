// socket_watch.h — finding and shutting down the TCP sockets of one Gloo context from outside Gloo.
//
// libgloo-dev does not install the headers that would give us a pair's fd (reference notes §2.2),
// so connect_gloo finds them at the OS level: it lists this process's sockets (/proc/self/fd)
// before connectFullMesh, lists them again after, and keeps the new connected TCP stream sockets
// whose local address is the data-plane host. Other threads may open sockets meanwhile (ZeroMQ
// reconnects, say), so the ranks then confirm through the store: each publishes the local
// endpoints of its candidates, and a candidate is kept only when its peer is an endpoint another
// rank published — which also tells which rank it leads to.
//
// Kept sockets are dup()ed: the duplicate refers to the same socket even after Gloo closes its fd
// and the number is reused, so shutdown() can never hit an unrelated socket. (Gloo removes a fd from
// its epoll set before closing it, so the duplicate does not keep stale events alive.) The socket
// itself is released when both Gloo and we have closed it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"

namespace gloo::rendezvous {
class Store;
}

namespace sal::comm {

// Inode numbers of every socket this process has open.
std::set<uint64_t> socket_inodes();

// The IP addresses `host` resolves to ("127.0.0.1"); empty when it does not resolve.
std::vector<std::string> resolve_host(const std::string& host);

struct PeerSocket {
  int fd = -1;        // our duplicate
  int peer_rank = -1;
  std::string local;  // "127.0.0.1:40312"
  std::string peer;
};

// Owns the duplicates; closes them when destroyed.
class PeerSockets {
 public:
  PeerSockets() = default;
  explicit PeerSockets(std::vector<PeerSocket> s) : sockets_(std::move(s)) {}
  PeerSockets(PeerSockets&& o) noexcept : sockets_(std::move(o.sockets_)) { o.sockets_.clear(); }
  PeerSockets& operator=(PeerSockets&& o) noexcept;
  PeerSockets(const PeerSockets&) = delete;
  PeerSockets& operator=(const PeerSockets&) = delete;
  ~PeerSockets();

  // shutdown(SHUT_RDWR) on every socket: the I/O thread of whoever uses them sees EOF at once and
  // the peers see FIN. Async-signal-safe, never blocks, idempotent.
  void shutdown_all() const;
  const std::vector<PeerSocket>& list() const { return sockets_; }
  size_t size() const { return sockets_.size(); }

 private:
  void close_all();
  std::vector<PeerSocket> sockets_;
};

// New connected TCP sockets (inode not in `before`) whose local IP is one of `local_ips` (any when
// empty), duplicated. peer_rank is still -1.
std::vector<PeerSocket> new_tcp_sockets(const std::set<uint64_t>& before, const std::vector<std::string>& local_ips);

// The store round described above: publishes `candidates`' local endpoints under
// "sal-sockets/<rank>", reads every other rank's, keeps the candidates that lead to one of them
// (closing the rest) and requires exactly one socket per other rank.
Result<PeerSockets> confirm_peer_sockets(std::vector<PeerSocket> candidates, gloo::rendezvous::Store& store, int rank,
                                         int size, int64_t timeout_ms);

}  // namespace sal::comm

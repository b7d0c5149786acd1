// socket_watch.h — finding and shutting down the TCP sockets of one Gloo context from outside Gloo.
//
// libgloo-dev does not install the headers that would give us a pair's fd (reference notes §2.2),
// so connect_gloo finds them at the OS level: it lists this process's sockets (/proc/self/fd)
// before connectFullMesh, lists them again after, and keeps the new connected TCP stream sockets
// whose local address is the data-plane host. Other threads may open sockets meanwhile (ZeroMQ
// reconnects, say), so the ranks then confirm through the store: each publishes its candidates
// (local and peer endpoint), every rank judges the whole mesh from every rank's report, and a
// candidate is kept only when another rank published its mirror image — which also tells which
// rank it leads to. Gloo's pair accepts the first connection on its listening port, whoever makes
// it (a ZeroMQ socket reconnecting to a port it once knew, say): the judgement finds such a pair,
// and as every rank reaches the same verdict from the same reports, they can connect again
// together (connect_gloo does).
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

// What one rank says of its try at the mesh: the sockets it found, or why its connect failed.
struct MeshReport {
  std::string error;  // non-empty: this rank's connect failed (then no sockets)
  std::vector<std::pair<std::string, std::string>> sockets;  // (local, peer) endpoints
};
std::vector<char> encode_mesh_report(const MeshReport& r);
MeshReport decode_mesh_report(const std::vector<char>& bytes);

// The whole mesh judged from every rank's report (index = rank); pure, so every rank reaches the
// same verdict. A socket of rank i leads to rank j when j reported the same socket from its end
// (local and peer swapped).
struct MeshVerdict {
  std::vector<std::vector<int>> peer_rank;  // [rank][socket] -> the rank it leads to, -1: none (a stranger)
  std::string problem;                      // empty: every pair of ranks joined by exactly one socket
  bool ok() const { return problem.empty(); }
};
MeshVerdict judge_mesh(const std::vector<MeshReport>& reports);

// The store round: publishes `mine` under "sal-sockets/<rank>", waits up to `timeout_ms` for every
// other rank's report and judges the mesh. An error only when some rank's report did not come (or
// the store failed): then the ranks cannot try again together.
Result<MeshVerdict> exchange_mesh_reports(const MeshReport& mine, gloo::rendezvous::Store& store, int rank, int size,
                                          int64_t timeout_ms);

// This rank's sockets that the verdict says lead to a rank, each with its peer_rank; the rest
// (strangers) are closed.
PeerSockets keep_peer_sockets(std::vector<PeerSocket> candidates, const std::vector<int>& peer_rank);

}  // namespace sal::comm

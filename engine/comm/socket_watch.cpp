// socket_watch.cpp — see socket_watch.h. Linux only (/proc/self/fd, SO_TYPE).
#include "comm/socket_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/strings.h"

namespace sal::comm {

namespace {

// "socket:[12345]" -> 12345; 0 for anything else.
uint64_t socket_inode_of(int fd) {
  char path[64];
  char link[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n <= 0) return 0;
  link[n] = '\0';
  if (std::strncmp(link, "socket:[", 8) != 0) return 0;
  return std::strtoull(link + 8, nullptr, 10);
}

// Every open fd of this process that is a socket, with its inode.
std::map<int, uint64_t> socket_fds() {
  std::map<int, uint64_t> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    if (fd == self) continue;
    if (uint64_t ino = socket_inode_of(fd)) out[fd] = ino;
  }
  closedir(d);
  return out;
}

// "ip:port" (IPv6 as "[ip]:port"); "" for other families.
std::string format_endpoint(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "";
}

std::string host_part(const std::string& endpoint) {
  std::string h = endpoint.substr(0, endpoint.rfind(':'));
  if (h.size() >= 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
  return h;
}

bool is_tcp_stream(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return false;
  int proto = 0;
  len = sizeof proto;
  return getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 && proto == IPPROTO_TCP;
}

// Fills local/peer endpoints; false unless the socket is connected over IPv4/IPv6.
bool endpoints_of(int fd, std::string* local, std::string* peer) {
  sockaddr_storage a{};
  sockaddr_storage b{};
  socklen_t la = sizeof a;
  socklen_t lb = sizeof b;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0) return false;
  *local = format_endpoint(a);
  *peer = format_endpoint(b);
  return !local->empty() && !peer->empty();
}

// A duplicate of fd that refers to socket `ino`, or -1 (fd was closed and reused meanwhile).
int dup_if_same(int fd, uint64_t ino) {
  int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) return -1;
  struct stat st {};
  if (fstat(d, &st) != 0 || uint64_t(st.st_ino) != ino) {
    ::close(d);
    return -1;
  }
  return d;
}

std::string key_for(int rank) { return "sal-sockets/" + std::to_string(rank); }

}  // namespace

std::set<uint64_t> socket_inodes() {
  std::set<uint64_t> out;
  for (const auto& [fd, ino] : socket_fds()) out.insert(ino);
  return out;
}

std::vector<std::string> resolve_host(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* p = res; p; p = p->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, p->ai_addr, std::min<size_t>(p->ai_addrlen, sizeof ss));
    std::string ep = format_endpoint(ss);
    if (!ep.empty()) out.push_back(host_part(ep));
  }
  freeaddrinfo(res);
  return out;
}

PeerSockets& PeerSockets::operator=(PeerSockets&& o) noexcept {
  if (this != &o) {
    close_all();
    sockets_ = std::move(o.sockets_);
    o.sockets_.clear();
  }
  return *this;
}

PeerSockets::~PeerSockets() { close_all(); }

void PeerSockets::close_all() {
  for (auto& s : sockets_) {
    if (s.fd >= 0) ::close(s.fd);
    s.fd = -1;
  }
  sockets_.clear();
}

void PeerSockets::shutdown_all() const {
  for (const auto& s : sockets_) {
    if (s.fd >= 0) ::shutdown(s.fd, SHUT_RDWR);  // ENOTCONN after the first time: harmless
  }
}

std::vector<PeerSocket> new_tcp_sockets(const std::set<uint64_t>& before, const std::vector<std::string>& local_ips) {
  std::vector<PeerSocket> out;
  for (const auto& [fd, ino] : socket_fds()) {
    if (before.count(ino) || !is_tcp_stream(fd)) continue;
    PeerSocket s;
    if (!endpoints_of(fd, &s.local, &s.peer)) continue;
    if (!local_ips.empty() &&
        std::find(local_ips.begin(), local_ips.end(), host_part(s.local)) == local_ips.end()) {
      continue;
    }
    s.fd = dup_if_same(fd, ino);
    if (s.fd >= 0) out.push_back(std::move(s));
  }
  return out;
}

std::vector<char> encode_mesh_report(const MeshReport& r) {
  std::string text;
  if (!r.error.empty()) {
    text = "failed " + r.error;
  } else {
    for (const auto& [local, peer] : r.sockets) text += local + " " + peer + "\n";
  }
  return std::vector<char>(text.begin(), text.end());
}

MeshReport decode_mesh_report(const std::vector<char>& bytes) {
  const std::string text(bytes.begin(), bytes.end());
  MeshReport r;
  if (text.rfind("failed ", 0) == 0) {
    r.error = text.substr(7);
    return r;
  }
  for (const auto& line : split(text, '\n')) {
    auto space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size()) continue;
    r.sockets.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return r;
}

MeshVerdict judge_mesh(const std::vector<MeshReport>& reports) {
  const int size = int(reports.size());
  MeshVerdict v;
  v.peer_rank.resize(reports.size());
  std::map<std::pair<std::string, std::string>, int> owner;  // (local, peer) as reported by rank r -> r
  for (int r = 0; r < size; ++r) {
    if (!reports[r].error.empty() && v.problem.empty()) v.problem = "rank " + std::to_string(r) + "'s connect failed: " + reports[r].error;
    for (const auto& s : reports[r].sockets) owner.emplace(s, r);
  }
  std::vector<std::vector<int>> joined(reports.size(), std::vector<int>(reports.size(), 0));
  for (int r = 0; r < size; ++r) {
    for (const auto& [local, peer] : reports[r].sockets) {
      auto it = owner.find({peer, local});
      int to = (it == owner.end() || it->second == r) ? -1 : it->second;
      v.peer_rank[r].push_back(to);
      if (to >= 0) ++joined[r][to];
    }
  }
  for (int r = 0; r < size && v.problem.empty(); ++r) {
    if (!reports[r].error.empty()) continue;
    for (int j = 0; j < size && v.problem.empty(); ++j) {
      if (j == r || !reports[j].error.empty() || joined[r][j] == 1) continue;
      v.problem = "rank " + std::to_string(r) + " has " + std::to_string(joined[r][j]) + " sockets to rank " +
                  std::to_string(j) + " (expected 1: a pair connected to someone else, or twice)";
    }
  }
  return v;
}

Result<MeshVerdict> exchange_mesh_reports(const MeshReport& mine, gloo::rendezvous::Store& store, int rank, int size,
                                          int64_t timeout_ms) {
  std::vector<MeshReport> reports(static_cast<size_t>(size));
  reports[size_t(rank)] = mine;
  try {
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) {
      if (r != rank) keys.push_back(key_for(r));
    }
    store.set(key_for(rank), encode_mesh_report(mine));
    store.wait(keys, std::chrono::milliseconds(timeout_ms));
    for (int r = 0; r < size; ++r) {
      if (r != rank) reports[size_t(r)] = decode_mesh_report(store.get(key_for(r)));
    }
  } catch (const std::exception& e) {
    return fail("exchanging socket endpoints through the store: ", e.what());
  }
  return judge_mesh(reports);
}

PeerSockets keep_peer_sockets(std::vector<PeerSocket> candidates, const std::vector<int>& peer_rank) {
  std::vector<PeerSocket> kept;
  std::vector<PeerSocket> strangers;  // opened by another part of the process meanwhile
  for (size_t i = 0; i < candidates.size(); ++i) {
    int to = i < peer_rank.size() ? peer_rank[i] : -1;
    candidates[i].peer_rank = to;
    (to >= 0 ? kept : strangers).push_back(candidates[i]);
  }
  PeerSockets drop(std::move(strangers));
  return PeerSockets(std::move(kept));
}

}  // namespace sal::comm

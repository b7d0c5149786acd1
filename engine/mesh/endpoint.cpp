// endpoint.cpp — see endpoint.h.
#include "mesh/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "wire/codec.h"

namespace sal::mesh {

// Outgoing messages queued per peer before sends to it start failing (EAGAIN): a slow or frozen
// peer must not make the controller buffer without bound.
constexpr int kSendHighWater = 10000;

void apply_control_options(zmq::socket_t& s) {
  s.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, kSendHighWater);
}

Result<std::string> bind_endpoint(zmq::socket_t& s, const std::string& endpoint) {
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return fail("cannot bind ", endpoint, ": ", e.what());
  }
  return s.get(zmq::sockopt::last_endpoint);
}

std::string peer_address(int fd) {
  if (fd < 0) return "";
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  if (ss.ss_family == AF_UNIX) return "local";
  return "";
}

int source_fd(const zmq::message_t& msg) {
  return zmq_msg_get(const_cast<zmq_msg_t*>(msg.handle()), ZMQ_SRCFD);
}

}  // namespace sal::mesh

namespace sal::mesh {

pid_t peer_pid(int fd) {
  if (fd < 0) return -1;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return cred.pid;
}

}  // namespace sal::mesh

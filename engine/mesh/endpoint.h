// endpoint.h — ZeroMQ endpoints and socket settings shared by every control socket: which
// endpoints count as local (loopback TCP, ipc, inproc), the options every socket gets
// (ZMQ_MAXMSGSIZE, no linger), and peer addresses from the fd a message came in on.
#pragma once

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <sys/types.h>

#include <string>

#include "core/result.h"
#include "wire/curve.h"

namespace sal::mesh {

// tcp://127.x.y.z, tcp://localhost, tcp://[::1], ipc://, inproc:// — reachable from this host only.
using wire::is_local_endpoint;

// Applies ZMQ_MAXMSGSIZE (wire::kMaxFrameBytes), linger 0 and a bounded send queue.
void apply_control_options(zmq::socket_t& s);

// Binds and returns the resolved endpoint (with the real port when bound to "*").
Result<std::string> bind_endpoint(zmq::socket_t& s, const std::string& endpoint);

// "127.0.0.1:40312" for the TCP peer of fd, or "local" for ipc, or "" when unknown.
std::string peer_address(int fd);

// The fd a received message came in on (ZMQ_SRCFD), -1 when unknown.
int source_fd(const zmq::message_t& msg);

// The process at the other end of a unix-socket (ipc://) connection (SO_PEERCRED), -1 when unknown.
pid_t peer_pid(int fd);

}  // namespace sal::mesh

// monitor.h — connection events of a server socket, so a peer process that dies is noticed at
// once (the kernel closes its TCP connection on exit, SIGKILL included) instead of at the next
// missed heartbeat. Wraps zmq_socket_monitor: ACCEPTED/DISCONNECTED carry the connection's fd,
// and messages carry the same fd (ZMQ_SRCFD), which is how a disconnect is tied to a node.
#pragma once

#include <uv.h>
#include <zmq.hpp>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "mesh/zmq_uv.h"

namespace sal::mesh {

struct ConnectionEvent {
  enum Kind { accepted, disconnected, handshake_failed } kind;
  int fd = -1;            // for accepted / disconnected
  int detail = 0;         // zmq's event value (protocol error code for handshake failures)
  std::string peer;       // "ip:port" when known
};

class SocketMonitor {
 public:
  SocketMonitor(uv_loop_t* loop, zmq::context_t& ctx, zmq::socket_t& watched,
                const std::string& name, std::function<void(const ConnectionEvent&)> on_event);
  ~SocketMonitor();
  // Handles every event waiting now (the controller's service hook, during long evaluations).
  void drain() { watcher_->drain(); }

 private:
  void on_message();

  zmq::socket_t& watched_;
  zmq::socket_t pair_;
  std::unique_ptr<ZmqWatcher> watcher_;
  std::function<void(const ConnectionEvent&)> on_event_;
  std::unordered_map<int, std::string> peers_;  // fd -> address, captured at accept
};

}  // namespace sal::mesh

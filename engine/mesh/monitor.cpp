// monitor.cpp — see monitor.h.
#include "mesh/monitor.h"

#include <cstring>
#include <unordered_map>

#include "mesh/endpoint.h"

namespace sal::mesh {

SocketMonitor::SocketMonitor(uv_loop_t* loop, zmq::context_t& ctx, zmq::socket_t& watched,
                             const std::string& name,
                             std::function<void(const ConnectionEvent&)> on_event)
    : watched_(watched), pair_(ctx, zmq::socket_type::pair), on_event_(std::move(on_event)) {
  static int counter = 0;
  std::string ep = "inproc://monitor-" + name + "-" + std::to_string(++counter);
  int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(watched_.handle(), ep.c_str(), events) != 0)
    throw zmq::error_t();
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(ep);
  watcher_ = std::make_unique<ZmqWatcher>(loop, pair_, [this] { on_message(); });
}

SocketMonitor::~SocketMonitor() {
  watcher_.reset();
  zmq_socket_monitor(watched_.handle(), nullptr, 0);
}

void SocketMonitor::on_message() {
  std::vector<zmq::message_t> parts;
  if (!recv_now(pair_, parts) || parts.size() < 2 || parts[0].size() < 6) return;
  uint16_t event = 0;
  uint32_t value = 0;
  std::memcpy(&event, parts[0].data(), 2);
  std::memcpy(&value, static_cast<const char*>(parts[0].data()) + 2, 4);
  ConnectionEvent ev{};
  ev.detail = int(value);
  switch (event) {
    case ZMQ_EVENT_ACCEPTED:
      ev.kind = ConnectionEvent::accepted;
      ev.fd = int(value);
      ev.peer = peer_address(ev.fd);
      peers_[ev.fd] = ev.peer;
      break;
    case ZMQ_EVENT_DISCONNECTED:
      ev.kind = ConnectionEvent::disconnected;
      ev.fd = int(value);
      ev.peer = peers_.count(ev.fd) ? peers_[ev.fd] : "";
      peers_.erase(ev.fd);
      break;
    default:
      ev.kind = ConnectionEvent::handshake_failed;
      break;
  }
  on_event_(ev);
}

}  // namespace sal::mesh

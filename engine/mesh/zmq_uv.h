// zmq_uv.h — a ZeroMQ socket on a libuv loop.
//
// ZMQ_FD is edge-triggered: it signals a change of state, and any zmq call on the socket (a send
// included) can consume the edge, after which a naive poll handler sleeps with messages waiting
// (zmq_getsockopt(3), ZMQ_FD). So, as flux-core's zwatcher does, we do not trust the fd for
// readiness: a prepare handle checks ZMQ_EVENTS before the loop blocks and, if a message is
// waiting, starts an idle handle so the loop does not block; a check handle after the poll phase
// calls the handler while ZMQ_EVENTS says POLLIN. The fd's uv_poll only wakes the loop. Handlers read with
// ZMQ_DONTWAIT until nothing is left (or a per-wakeup batch limit, so one busy socket cannot
// starve the others).
#pragma once

#include <uv.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <functional>
#include <string>
#include <vector>

#include "wire/codec.h"

namespace sal::mesh {

class ZmqWatcher {
 public:
  // `on_message` is called once per readable multipart message; it must read exactly one
  // message with recv_multipart(..., dontwait).
  ZmqWatcher(uv_loop_t* loop, zmq::socket_t& socket, std::function<void()> on_message);
  ~ZmqWatcher();
  ZmqWatcher(const ZmqWatcher&) = delete;
  ZmqWatcher& operator=(const ZmqWatcher&) = delete;

  // Reads every message waiting now (used by code that must not wait for the next loop turn,
  // e.g. the REPL's service hook, and before liveness decisions).
  void drain();

  struct Handles;  // the uv handles; outlive the watcher until their close callbacks run

 private:
  static void on_prepare(uv_prepare_t* h);
  static void on_check(uv_check_t* h);
  bool readable() const;

  zmq::socket_t& socket_;
  std::function<void()> on_message_;
  Handles* h_;  // freed by the last close callback
  bool draining_ = false;
};

// Receives one multipart message without blocking; false when none is waiting.
bool recv_now(zmq::socket_t& socket, std::vector<zmq::message_t>& parts);

// Sends `msg` to the peer `rid` of a ROUTER socket without blocking. Returns an empty string on
// success, else why not (queue full, peer gone): callers log it at the level they choose.
template <class M>
std::string send_routed(zmq::socket_t& router, const std::string& rid, const M& msg) {
  wire::Parts parts;
  parts.emplace_back(rid.data(), rid.size());
  wire::encode_into(msg, parts);
  try {
    if (!zmq::send_multipart(router, parts, zmq::send_flags::dontwait)) return "send queue full";
  } catch (const zmq::error_t& e) {
    return e.what();
  }
  return "";
}

}  // namespace sal::mesh

// store_client.h — a worker's connection to the controller's rendezvous store (StoreServer), as a
// gloo::rendezvous::Store so Gloo contexts can rendezvous through it.
//
// Two faces: put/fetch/wait_for return errors as values (for our own code); set/get/wait are the
// Gloo interface and throw StoreError, which Gloo lets through connectFullMesh and connect_gloo
// turns back into an Error. Every call has a deadline: get and wait use the client's default
// timeout unless given one; the server answers as soon as the keys exist, and the client gives up
// `reply_grace_ms` after the deadline when the server does not answer at all (it is gone).
// One DEALER socket, used by one call at a time (a mutex serialises callers); replies carry the
// request's id, so a late reply to an abandoned request is recognised and dropped.
#pragma once

#include <gloo/rendezvous/store.h>
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/store_protocol.h"
#include "core/result.h"

namespace sal::comm {

// What the Gloo-facing methods throw. code is a StoreCode.
struct StoreError : std::runtime_error {
  StoreError(const std::string& what, StoreCode c) : std::runtime_error(what), code(c) {}
  StoreCode code;
};

struct StoreClientOptions {
  std::chrono::milliseconds timeout{30000};     // get/wait without an explicit timeout, and set
  std::chrono::milliseconds reply_grace{2000};  // how long after a deadline a silent server is given
  StoreLimits limits;                           // checked before sending; must match the server's
  // Called on the DEALER before connect (e.g. CURVE client keys). An error is reported by every call.
  std::function<Status(zmq::socket_t&)> configure;
};

class StoreClient final : public gloo::rendezvous::Store {
 public:
  StoreClient(zmq::context_t& ctx, std::string endpoint, StoreClientOptions options = {});
  ~StoreClient() override;

  Status put(const std::string& key, const std::vector<char>& value);
  // Waits until the key exists (or the timeout passes) and returns its value.
  Result<std::vector<char>> fetch(const std::string& key, std::chrono::milliseconds timeout);
  Status wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // Thread-safe: makes the call in progress (and every later one) fail with `interrupted` within
  // ~10 ms, until clear_interrupt(). For a control thread that must stop a rendezvous.
  void interrupt();
  void clear_interrupt();

  const std::string& endpoint() const { return endpoint_; }

  // gloo::rendezvous::Store
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  Result<StoreReply> call(StoreRequest req, std::chrono::milliseconds server_timeout);
  Status ensure_socket();
  Result<StoreReply> await_reply(uint64_t id, int64_t deadline_ms);

  zmq::context_t& ctx_;
  std::string endpoint_;
  StoreClientOptions opt_;
  std::mutex mu_;
  std::unique_ptr<zmq::socket_t> sock_;
  uint64_t next_id_ = 1;
  std::atomic<bool> interrupted_{false};
};

}  // namespace sal::comm

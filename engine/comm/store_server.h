// store_server.h — the rendezvous store the controller serves for the data plane: a bounded
// key/value service on a ZeroMQ ROUTER (store_protocol.h), run on its own thread so that it answers
// even while the controller's loop is busy. Workers reach it with StoreClient; Gloo contexts
// rendezvous through it under a per-epoch prefix ("epoch-7/..."), and the controller drops an old
// epoch's keys with erase_prefix(). A get or wait for keys that do not exist yet is parked and
// answered as soon as they are set, or with a timeout error when its deadline passes.
#pragma once

#include <zmq.hpp>

#include <functional>
#include <memory>
#include <string>

#include "comm/store_protocol.h"
#include "core/result.h"

namespace sal::comm {

struct StoreServerOptions {
  StoreLimits limits;
  // Called on the ROUTER before bind (e.g. to make it a CURVE server when the endpoint is not
  // loopback — docs/operations.md, security). An error fails start().
  std::function<Status(zmq::socket_t&)> configure;
};

class StoreServer {
 public:
  StoreServer(zmq::context_t& ctx, std::string bind_endpoint, StoreServerOptions options = {});
  ~StoreServer();  // stops the thread
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Binds (on the calling thread, so a bad endpoint is reported here) and starts the thread.
  // Returns the bound endpoint, with the real port when bound to "tcp://127.0.0.1:*".
  Result<std::string> start();
  // Stops the thread; parked requests get a `stopping` error. Idempotent.
  void stop();

  // Drops every key that starts with `prefix` and fails parked requests for such keys with an
  // `erased` error. Thread-safe. Pass the separator too ("epoch-7/"), or "epoch-1" also drops
  // "epoch-10/...".
  void erase_prefix(const std::string& prefix);
  // The same, and the prefix is over for good: every later request for a key under it (a worker
  // that comes to an abandoned plan's rendezvous late) fails at once with `erased`, instead of
  // waiting for keys nobody will set. The last kClosedPrefixes closed prefixes are remembered.
  void close_prefix(const std::string& prefix);
  static constexpr size_t kClosedPrefixes = 4096;

  size_t key_count() const;    // thread-safe
  size_t total_bytes() const;  // keys + values, thread-safe
  const std::string& endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sal::comm

// security.h — CURVE encryption and authentication for endpoints reachable from other hosts.
//
// Binding the mesh or the REPL to anything but loopback/ipc requires the controller's CURVE key
// pair and an allowlist of client public keys with roles. libzmq accepts every CURVE client key
// unless a ZAP handler says otherwise, so the controller runs one (a thread serving
// inproc://zeromq.zap.01) that admits only listed keys and enforces the domain: the mesh socket's
// domain admits role "node" (agents), the REPL socket's admits observe/operate/admin.
#pragma once

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "wire/curve.h"

namespace sal::mesh {

constexpr const char* kMeshDomain = "salamander-mesh";
constexpr const char* kReplDomain = "salamander-repl";

using wire::KeyPair;  // NOLINT
using wire::load_key_file;
using wire::make_curve_client;
using wire::make_curve_server;

struct AllowEntry {
  std::string public_key;
  std::string role;  // node, observe, operate, admin
  std::string name;
};

class Allowlist {
 public:
  static Result<Allowlist> load(const std::string& path);
  const AllowEntry* find_key(const std::string& z85) const;
  const AllowEntry* find_name(const std::string& name) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<AllowEntry> entries_;
};

// The ZAP handler thread. Construct before binding any CURVE server socket.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& ctx, Allowlist allow);
  ~ZapHandler();

 private:
  void serve();
  zmq::context_t& ctx_;
  Allowlist allow_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The User-Id ZAP assigned to the peer that sent `msg` (empty without CURVE).
std::string user_id(zmq::message_t& msg);

// Role for a REPL session: admin for local endpoints, the allowlist's role under CURVE.
std::optional<Role> session_role(const std::string& user, const Allowlist* allow);

}  // namespace sal::mesh

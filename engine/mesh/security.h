// security.h — CURVE encryption and authentication for endpoints reachable from other hosts.
//
// Binding the mesh, the REPL or the data plane's rendezvous store to anything but loopback/ipc
// requires the controller's CURVE key pair and an allowlist of client public keys with roles.
// libzmq accepts every CURVE client key unless a ZAP handler says otherwise, so the controller runs
// one (a thread serving inproc://zeromq.zap.01) that admits only listed keys and enforces the
// domain: the mesh socket's and the store's domains admit role "node" (agents, and their workers,
// which use their agent's key), the REPL socket's admits observe/operate/admin.
#pragma once

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <atomic>
#include <map>
#include <mutex>
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
constexpr const char* kStoreDomain = "salamander-store";
constexpr const char* kSliceDomain = "salamander-slices";  // an agent's slice endpoint

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
  // The same from the file's text; `path` names it in errors.
  static Result<Allowlist> parse(const std::string& text, const std::string& path);
  const AllowEntry* find_key(const std::string& z85) const;
  const AllowEntry* find_name(const std::string& name) const;
  size_t size() const { return entries_.size(); }
  // The public keys of role `node` (the job's agents).
  std::vector<std::string> node_keys() const;
  // A list of `keys` as nodes (what an agent admits on its slice endpoint).
  static Allowlist of_nodes(const std::vector<std::string>& keys);

 private:
  std::vector<AllowEntry> entries_;
};

// The ZAP handler thread. Construct before binding any CURVE server socket.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& ctx, Allowlist allow);
  ~ZapHandler();
  // Replaces the allowlist (an agent learns the job's node keys with Welcome).
  void set_allowlist(Allowlist allow);

 private:
  void serve();
  zmq::context_t& ctx_;
  std::mutex mu_;  // allow_: read by the handler's thread, replaced by the owner's
  Allowlist allow_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What the ZAP handler answers a handshake: admitted with the key's name as the user, or refused
// with a reason (and a short kind for the log).
struct ZapVerdict {
  bool admitted = false;
  std::string user, reason, kind, key;  // key: Z85, when one was offered
};
ZapVerdict zap_verdict(const Allowlist& allow, const std::string& domain, const std::string& mechanism,
                       const std::string& key);

// Whether a key of `role` may connect on ZAP `domain`.
bool domain_admits(const std::string& domain, const std::string& role);

// The rendezvous store's socket hook (comm::StoreServerOptions::configure) for a store bound to
// `endpoint`: CURVE on the store's domain with the controller's key when the endpoint is reachable
// from other hosts; an error then if the controller has no key (it would have refused to start).
wire::SocketHook store_server_hook(const std::string& endpoint, const KeyPair* server_key);

// The User-Id ZAP assigned to the peer that sent `msg` (empty without CURVE).
std::string user_id(zmq::message_t& msg);

// Role for a REPL session: admin for local endpoints, the allowlist's role under CURVE.
std::optional<Role> session_role(const std::string& user, const Allowlist* allow);

}  // namespace sal::mesh

// netns.h — what tests built with netns_main.cpp share: the non-loopback address of their network
// namespace, a secured mesh (CURVE keys for the controller, agents and operators of each role,
// endpoints on that address), and a stranger's connection that sends raw frames and waits for any
// answer — the tools of the refusal and role tests.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/mesh_harness.h"
#include "wire/curve.h"

namespace sal::test {

// The namespace's second address: not loopback, so the engine requires CURVE on it.
constexpr const char* kNetnsAddress = "10.77.0.1";

// Key pairs written to a directory: the controller's, the agents' and one per REPL role, plus a
// stranger's that no allowlist names; `allow` lists all but the stranger.
struct Keys {
  std::string dir;
  wire::KeyPair server, node, observe, operate, admin, stranger;
  std::string file(const std::string& name) const { return dir + "/" + name + ".key"; }
};
Keys make_keys(const std::string& dir);

// A mesh whose controller binds the mesh, the REPL (and so the rendezvous store) on kNetnsAddress
// with CURVE, and whose agents connect with the node key and put their workers' data plane there
// too (the job states a private network unless `private_network` is false). Sessions of each role
// connect through session().
class SecureMesh {
 public:
  explicit SecureMesh(int agents, int64_t steps = 1000000, bool private_network = true);
  // Starts the controller and the agents; with `wait_ready`, waits until every worker is ready.
  void start(bool wait_ready = true);
  std::unique_ptr<repl::Client> session(const std::string& role);  // "observe", "operate", "admin"; connected
  nlohmann::json eval_json(repl::Client& c, const std::string& chunk);

  TestMesh mesh;
  Keys keys;
};

// The value a REPL chunk returns, as JSON; throws with the chunk and the reason where it fails.
nlohmann::json repl_json(repl::Client& c, const std::string& chunk);

// A connection that does what a stranger would: a DEALER, with CURVE keys or without, that sends
// raw frames and waits for any answer.
class Stranger {
 public:
  // Without keys: plain ZMTP (NULL mechanism). With them: CURVE towards `server_public`.
  Stranger(const std::string& endpoint, const std::string& server_public = "", const wire::KeyPair* own = nullptr);
  void send(const std::vector<std::string>& frames);
  bool answered(int timeout_ms);  // true if any message came back

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
};

}  // namespace sal::test

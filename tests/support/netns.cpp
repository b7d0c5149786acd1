// netns.cpp — see netns.h.
#include "support/netns.h"

#include <zmq_addon.hpp>

#include <fstream>
#include <stdexcept>

namespace sal::test {
namespace {

wire::KeyPair key(const std::string& dir, const std::string& name) {
  auto k = wire::generate_key_files(dir + "/" + name);
  if (!k) throw std::runtime_error(k.error().message());
  return *k;
}

}  // namespace

Keys make_keys(const std::string& dir) {
  Keys k;
  k.dir = dir;
  k.server = key(dir, "server");
  k.node = key(dir, "node");
  k.observe = key(dir, "observe");
  k.operate = key(dir, "operate");
  k.admin = key(dir, "admin");
  k.stranger = key(dir, "stranger");
  std::ofstream(dir + "/allow") << k.node.public_key << " node agents\n"
                                << k.observe.public_key << " observe olga\n"
                                << k.operate.public_key << " operate otto\n"
                                << k.admin.public_key << " admin ada\n";
  return k;
}

SecureMesh::SecureMesh(int agents, int64_t steps, bool private_network) {
  std::string ep = "tcp://" + std::string(kNetnsAddress) + ":*";
  mesh.opts.agents = agents;
  mesh.opts.steps = steps;
  mesh.opts.mesh_bind = ep;
  mesh.opts.repl_bind = ep;
  keys = make_keys(mesh.dir);
  mesh.opts.extra = "security = { server_key = '" + keys.file("server") + "', allow = '" + mesh.dir +
                    "/allow', private_network = " + (private_network ? "true" : "false") + " },";
}

void SecureMesh::start(bool wait_ready) {
  mesh.start_job();
  mesh.controller = spawn({bin(), "controller", mesh.dir + "/job.lua", "--out", mesh.dir, "--log-level", "debug"},
                          mesh.dir + "/controller.out");
  mesh.mesh_ep = mesh.controller.wait_for_line("mesh ", 5000);
  mesh.repl_ep = mesh.controller.wait_for_line("repl ", 5000);
  if (mesh.repl_ep.empty()) throw std::runtime_error("controller did not start:\n" + mesh.controller.output());
  for (int i = 0; i < mesh.opts.agents; ++i) {
    std::string name = "node" + std::to_string(i);
    mesh.agents.push_back(spawn({bin(), "agent", "--controller", mesh.mesh_ep, "--name", name, "--devices", "cpu:1",
                                 "--server-key", keys.server.public_key, "--key", keys.file("node"), "--data-host",
                                 kNetnsAddress},
                                mesh.dir + "/" + name + ".out"));
  }
  if (!wait_ready) return;
  auto admin = session("admin");
  bool ready = eventually([&] {
    auto s = eval_json(*admin, "return job.status()");
    return s["nodes"]["alive"] == mesh.opts.agents && s["workers"]["ready"] == mesh.opts.agents;
  }, 15000, 50);
  if (!ready) throw std::runtime_error("secure mesh did not come up:\n" + mesh.controller.output());
}

std::unique_ptr<repl::Client> SecureMesh::session(const std::string& role) {
  auto c = std::make_unique<repl::Client>(repl::ClientOptions{mesh.repl_ep, keys.server.public_key, keys.file(role), 5000});
  auto w = c->connect();
  if (!w) throw std::runtime_error(role + " session: " + w.error().message());
  return c;
}

nlohmann::json SecureMesh::eval_json(repl::Client& c, const std::string& chunk) { return repl_json(c, chunk); }

nlohmann::json repl_json(repl::Client& c, const std::string& chunk) {
  auto r = c.eval(chunk, wire::ValueFormat::json);
  if (!r) throw std::runtime_error(chunk + ": " + r.error().message());
  if (!r->ok) throw std::runtime_error(chunk + " failed: " + r->error);
  auto arr = nlohmann::json::parse(r->value);
  return arr.empty() ? nlohmann::json() : arr[0];
}

Stranger::Stranger(const std::string& endpoint, const std::string& server_public, const wire::KeyPair* own)
    : sock_(ctx_, zmq::socket_type::dealer) {
  sock_.set(zmq::sockopt::linger, 0);
  if (own) wire::make_curve_client(sock_, server_public, *own);
  sock_.connect(endpoint);
}

void Stranger::send(const std::vector<std::string>& frames) {
  std::vector<zmq::message_t> parts;
  for (const auto& f : frames) parts.emplace_back(f.data(), f.size());
  (void)zmq::send_multipart(sock_, parts, zmq::send_flags::dontwait);
}

bool Stranger::answered(int timeout_ms) {
  zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
  return zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) > 0;
}

}  // namespace sal::test

// mesh_harness.cpp — see mesh_harness.h.
#include "support/mesh_harness.h"

#include <algorithm>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sal::test {
namespace {

void ensure(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

}  // namespace

std::string bin() { return SAL_BIN; }
std::string docs_dir() { return SAL_SOURCE_DIR "/docs"; }

TestMesh::TestMesh(MeshOptions o) : opts(std::move(o)), dir(temp_dir("mesh")) {}

void TestMesh::start_job() {
  std::ofstream job(dir + "/job.lua");
  job << "return {\n  name = 'test',\n  mesh = { heartbeat_ms = " << opts.heartbeat_ms
      << ", miss_limit = " << opts.miss_limit << ", bind = '" << opts.mesh_bind << "'" << opts.mesh_extra << " },\n"
      << "  repl = { bind = '" << opts.repl_bind << "', budget_ms = " << opts.repl_budget_ms
      << ", memory_mb = " << opts.repl_memory_mb << " },\n"
      << "  train = { steps = " << opts.steps << ", " << opts.train << " },\n  " << opts.model << "\n  " << opts.data << "\n  " << opts.extra << "\n}\n";
}

void TestMesh::connect_controller(std::vector<std::string> args, const std::string& log) {
  controller = spawn(std::move(args), dir + "/" + log);
  mesh_ep = controller.wait_for_line("mesh ", 5000);
  repl_ep = controller.wait_for_line("repl ", 5000);
  ensure(!repl_ep.empty(), "controller did not start:\n" + controller.output());
  client_ = std::make_unique<repl::Client>(repl::ClientOptions{repl_ep});
  auto w = client_->connect();
  ensure(w.ok(), w.ok() ? "" : w.error().message());
}

void TestMesh::resume_controller() {
  ++resumes;
  std::string log = resumes == 1 ? "controller-resumed.out" : "controller-resumed-" + std::to_string(resumes) + ".out";
  connect_controller({bin(), "controller", "--resume", dir, "--log-level", opts.log_level}, log);
}

void TestMesh::start() {
  start_job();
  connect_controller({bin(), "controller", dir + "/job.lua", "--out", dir, "--log-level", opts.log_level}, "controller.out");
  for (int i = 0; i < opts.agents; ++i) add_agent("node" + std::to_string(i));
  // each agent starts a worker per device: cpu:K is K of them, cuda:I,J,... one per GPU named
  const std::string& d = opts.devices;
  const int per_agent = d.rfind("cpu:", 0) == 0 ? std::stoi(d.substr(4)) : int(std::count(d.begin(), d.end(), ',')) + 1;
  bool ready = eventually([&] {
    auto s = status();
    return s["nodes"]["alive"] == opts.agents && s["workers"]["ready"] == opts.agents * per_agent;
  }, 10000, 20);
  ensure(ready, "mesh did not come up: " + status().dump());
}

Proc& TestMesh::add_agent(const std::string& name) {
  std::vector<std::string> argv{bin(), "agent", "--controller", mesh_ep, "--name", name, "--devices", opts.devices,
                                "--log-level", opts.agent_log_level};
  if (opts.cpu_share > 0) argv.insert(argv.end(), {"--cpu-share", std::to_string(opts.cpu_share)});
  agents.push_back(spawn(argv, dir + "/" + name + ".out"));
  return agents.back();
}

wire::ReplResult TestMesh::eval(const std::string& chunk) {
  auto r = client_->eval(chunk, wire::ValueFormat::json);
  ensure(r.ok(), r.ok() ? "" : r.error().message());
  return *r;
}

nlohmann::json TestMesh::eval_json(const std::string& chunk) {
  auto r = eval(chunk);
  ensure(r.ok, chunk + " failed: " + r.error);
  auto arr = nlohmann::json::parse(r.value);
  return arr.empty() ? nlohmann::json() : arr[0];
}

nlohmann::json TestMesh::node(int64_t id) {
  for (auto& n : nodes())
    if (n["id"] == id) return n;
  throw std::runtime_error("no node " + std::to_string(id));
}

}  // namespace sal::test

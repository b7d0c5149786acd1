// mesh_harness.h — a real mesh for integration tests: writes a job file, starts
// `salamander controller` and N `salamander agent` processes on loopback, and talks to the
// controller through the real REPL client, as an operator would. Everything it started is killed
// when it goes out of scope. Failures throw std::runtime_error (a test case reports them).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "repl/client.h"
#include "support/proc.h"

namespace sal::test {

struct MeshOptions {
  int agents = 4;
  int heartbeat_ms = 100;
  int miss_limit = 3;
  int64_t steps = 0;
  int repl_budget_ms = 1000;
  int repl_memory_mb = 64;
  std::string mesh_bind = "tcp://127.0.0.1:*";
  std::string mesh_extra;  // more mesh keys: ", racks = '...'"
  std::string repl_bind = "tcp://127.0.0.1:*";
  // The model and data sections: by default a tiny model (steps take milliseconds) on the repo's
  // docs/ (real English text that is always there).
  std::string model = "model = { layers = 1, d_model = 16, heads = 2, experts = 4, top_k = 2, seq_len = 16 },";
  std::string data = "data = { path = '" SAL_SOURCE_DIR "/docs' },";
  std::string train = "batch = 8";  // more train keys (steps is set from `steps`)
  std::string extra;  // more job-file text inside the returned table
  double cpu_share = 0;  // > 0: agents run with --cpu-share (benchmarks' fair measurement)
  std::string devices = "cpu:1";  // each agent's --devices (one worker)
  std::string log_level = "debug";  // the controller's
  std::string agent_log_level = "info";  // the agents' and their workers' ("debug": each plan applied, each step)
};

class TestMesh {
 public:
  explicit TestMesh(MeshOptions o = {});

  // Starts the controller and the agents and waits until every worker is ready.
  void start();
  // Only writes dir/job.lua (for tests that start the controller themselves).
  void start_job();
  Proc& add_agent(const std::string& name);
  // Brings the controller back from its journal after it died (`salamander controller --resume
  // dir`, which binds the mesh endpoint the agents know) and reconnects the REPL to it. It logs to
  // controller-resumed.out, then controller-resumed-2.out, -3.out, … (each its own endpoints).
  void resume_controller();

  // REPL, through a persistent session.
  wire::ReplResult eval(const std::string& chunk);
  nlohmann::json eval_json(const std::string& chunk);  // REQUIREs success
  nlohmann::json nodes() { return eval_json("return job.nodes(true)"); }
  nlohmann::json node(int64_t id);
  std::string state_of(int64_t id) { return node(id)["state"]; }
  nlohmann::json status() { return eval_json("return job.status()"); }

  MeshOptions opts;
  std::string dir;
  std::string mesh_ep, repl_ep;
  Proc controller;
  int resumes = 0;  // resume_controller() calls so far
  std::vector<Proc> agents;

 private:
  void connect_controller(std::vector<std::string> args, const std::string& log);
  std::unique_ptr<repl::Client> client_;
};

std::string bin();  // the salamander binary under test
std::string docs_dir();  // the repo's docs/: a small corpus of real text for test jobs

}  // namespace sal::test

// t0520_repl_sim.cpp — the simulator driven from a live controller's REPL, as an operator would:
// sim.run{...} returns a job id at once and the run goes on in the background while the mesh is
// served; sim.status() reports its progress; sim.result() and sim.table() give the outcome (a
// strategy that restarts from a checkpoint restores after a node dies, Salamander does not);
// a wrong field is refused at once naming it; sim.cancel() stops a long run; no more than two
// run at once; stopping the controller cancels what still runs.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

// 8 nodes, 1 s steps, node 2 dies for good 50 s in: Salamander reconfigures around it, a
// checkpoint-restart job (a checkpoint every 100 steps) rolls back to step 0 and restarts.
const char* kScenario =
    "{ name = 't0520', cluster = { nodes = 8, gpus_per_node = 1, slots_per_gpu = 2 },"
    "  failures = { faults = { { at_s = 50, node = 2 } } },"
    "  workload = { experts = 8, top_k = 2 }, step = { fixed_s = 1 },"
    "  strategies = { 'salamander', 'checkpoint-restart' },"
    "  stop = { steps = 200 } }";

// A run far too long to finish during the test.
const char* kEndless =
    "{ name = 'endless', cluster = { nodes = 8 }, step = { fixed_s = 0.001 },"
    "  failures = { law = 'exponential', mtbf_s = 3600, repair_s = 60 },"
    "  strategies = { 'salamander' }, stop = { steps = 1000000000000, horizon_s = 1000000000000 } }";

nlohmann::json wait_finished(TestMesh& m, int64_t id, int timeout_ms) {
  nlohmann::json st;
  eventually([&] {
    st = m.eval_json("return sim.status(" + std::to_string(id) + ")");
    return st["state"] != "running";
  }, timeout_ms, 100);
  return st;
}

const nlohmann::json* strategy(const nlohmann::json& result, const std::string& label) {
  for (const auto& s : result["points"][0]["strategies"])
    if (s["label"] == label) return &s;
  return nullptr;
}

bool error_has(const wire::ReplResult& r, const std::string& text) {
  return !r.ok && r.error.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("t0520-repl-sim-run: sim.run works in the background, and status, result and table report it") {
  TestMesh m({.agents = 1});
  m.start();
  CHECK(m.eval_json("return sim.status()").is_null());  // none started yet
  int64_t id = m.eval_json(std::string("return sim.run(") + kScenario + ", { trials = 3, seed = 7 })");
  CHECK(id == 1);

  auto st = wait_finished(m, id, 60000);
  REQUIRE(st["state"] == "done");
  CHECK(st["id"] == id);
  CHECK(st["name"] == "t0520");
  CHECK(st["total"] == 6);  // 2 strategies x 3 trials
  CHECK(st["done"] == 6);
  CHECK(st["events"].get<int64_t>() > 0);
  CHECK(st["line"].get<std::string>().rfind("sim 1: done, 6/6 trial runs", 0) == 0);

  auto result = m.eval_json("return sim.result(1)");
  CHECK(result["trials"] == 3);
  CHECK(result["seed"] == 7);
  REQUIRE(result["points"].size() == 1);
  const auto* sal = strategy(result, "salamander");
  const auto* cr = strategy(result, "checkpoint-restart");
  REQUIRE(sal);
  REQUIRE(cr);
  for (const auto* s : {sal, cr}) {
    CAPTURE(*s);
    CHECK((*s)["samples"]["mean"].get<double>() > 0);
    CHECK((*s)["finished"] == 3);
    CHECK((*s)["failures"]["mean"].get<double>() >= 1);
  }
  // The dead node costs the checkpoint-restart job a restore and the steps since its checkpoint;
  // Salamander's replicas cover the node, so it loses nothing and finishes first.
  CHECK((*cr)["restores"]["mean"].get<double>() >= 1);
  CHECK((*cr)["lost_steps"]["mean"].get<double>() > 0);
  CHECK((*sal)["restores"]["mean"].get<double>() == 0);
  CHECK((*sal)["jct_s"]["mean"].get<double>() < (*cr)["jct_s"]["mean"].get<double>());

  std::string table = m.eval_json("return sim.table(1)");
  CHECK(table.find("salamander") != std::string::npos);
  CHECK(table.find("checkpoint-restart") != std::string::npos);
  auto list = m.eval_json("return sim.list()");
  REQUIRE(list.size() == 1);
  CHECK(list[0]["state"] == "done");

  // The one-liner an operator polls with.
  Proc cli = spawn({bin(), "repl", m.repl_ep, "-e", "return sim.status(1).line", "--json"}, m.dir + "/line.out");
  CHECK(cli.wait(5000) == 0);
  CHECK(nlohmann::json::parse(cli.output()) == st["line"]);
  CHECK(m.status()["nodes"]["alive"] == 1);
}

TEST_CASE("t0520-repl-sim-errors: a wrong scenario is refused at once, naming the field or the file") {
  TestMesh m({.agents = 0});
  m.start();
  auto bad = m.eval("return sim.run{ cluster = { nodes = 'x' } }");
  CAPTURE(bad.error);
  CHECK(error_has(bad, "sim.run: "));
  CHECK(error_has(bad, "cluster.nodes"));
  auto missing = m.eval("return sim.run('/nonexistent/t0520.lua')");
  CHECK(error_has(missing, "/nonexistent/t0520.lua"));
  CHECK(error_has(m.eval(std::string("return sim.run(") + kScenario + ", { trails = 3 })"), "unknown option 'trails'"));
  CHECK(error_has(m.eval("return sim.run(42)"), "scenario table or the path"));
  CHECK(error_has(m.eval("return sim.result(3)"), "no job 3"));
  CHECK(m.eval_json("return sim.list()").empty());  // nothing was started
}

TEST_CASE("t0520-repl-sim-cancel: a long run is cancelled, and a third concurrent run is refused") {
  TestMesh m({.agents = 1});
  m.start();
  int64_t a = m.eval_json(std::string("return sim.run(") + kEndless + ")");
  int64_t b = m.eval_json(std::string("return sim.run(") + kEndless + ", { seed = 2 })");
  CHECK(error_has(m.eval(std::string("return sim.run(") + kEndless + ")"), "2 simulations are running"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto st = m.eval_json("return sim.status(" + std::to_string(a) + ")");
  CHECK(st["state"] == "running");
  CHECK(st["line"].get<std::string>().rfind("sim 1: ", 0) == 0);
  CHECK(error_has(m.eval("return sim.result(1)"), "sim.result: job 1 is still running ("));

  double t0 = now_ms();
  CHECK(m.eval_json("return sim.cancel(" + std::to_string(a) + ")") == true);
  st = wait_finished(m, a, 10000);
  CHECK(st["state"] == "cancelled");
  CHECK(now_ms() - t0 < 10000);
  CHECK(m.eval_json("return sim.cancel(" + std::to_string(a) + ")") == false);  // already over
  CHECK(error_has(m.eval("return sim.result(1)"), "was cancelled"));
  CHECK(m.eval_json("return sim.status().id") == b);  // the latest
  CHECK(m.eval_json("return sim.cancel(" + std::to_string(b) + ")") == true);
  CHECK(wait_finished(m, b, 10000)["state"] == "cancelled");
  // Two busy simulation threads did not starve the controller: the node was never suspected.
  CHECK(m.status()["nodes"]["alive"] == 1);
  for (auto& e : m.eval_json("return job.events(500)")) CHECK(e["kind"] != "node_suspect");

  // A controller told to stop cancels the simulation still running and waits for its thread.
  int64_t c = m.eval_json(std::string("return sim.run(") + kEndless + ")");
  m.controller.signal(SIGTERM);
  CHECK(m.controller.wait(15000) >= 0);
  CHECK(m.controller.output().find("sim " + std::to_string(c) + ": cancelled") != std::string::npos);
}

// t0210_repl.cpp — the REPL attached to a live controller: budgets stop runaway chunks while the
// mesh keeps being served, sessions are separate, the CLI's exit codes, completion and help.
#include <doctest/doctest.h>
#include <signal.h>

#include <thread>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

double event_ms(TestMesh& m, const std::string& kind, int64_t node) {
  for (auto& e : m.eval_json("return job.events(500)"))
    if (e["kind"] == kind && e.value("node", -1) == node) return e["mono_ns"].get<double>() / 1e6;
  return -1;
}

int64_t id_of(TestMesh& m, pid_t pid) {
  for (auto& n : m.nodes())
    if (n["pid"] == pid) return n["id"];
  return -1;
}

}  // namespace

TEST_CASE("t0210-repl-runaway: a chunk looping forever is stopped within its budget while the mesh is served") {
  TestMesh m({.repl_budget_ms = 1200});
  m.start();
  int64_t killed = id_of(m, m.agents[0].pid()), frozen = id_of(m, m.agents[1].pid());
  std::thread saboteur([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    m.agents[0].signal(SIGKILL);
    m.agents[1].signal(SIGSTOP);
  });
  double t0 = now_ms();
  auto r = m.eval("while true do end");
  double t_end = now_ms();
  saboteur.join();
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("repl.budget_ms (1200 ms) exceeded") != std::string::npos);
  CHECK(t_end - t0 >= 1150);
  CHECK(t_end - t0 < 1700);
  // Both failures were detected while the chunk was still running: the loop kept serving the mesh.
  double dead_killed = event_ms(m, "node_dead", killed), dead_frozen = event_ms(m, "node_dead", frozen);
  REQUIRE(dead_killed > 0);
  REQUIRE(dead_frozen > 0);
  CHECK(dead_killed < t0 + 400);
  CHECK(dead_frozen < t0 + 700);
  CHECK(dead_frozen < t_end - 300);
  // Heartbeats of the healthy nodes kept flowing: nobody else was suspected.
  auto s = m.status();
  CHECK(s["nodes"]["alive"] == 2);
  for (auto& e : m.eval_json("return job.events(500)"))
    if (e["kind"] == "node_suspect") CHECK(e["node"] == frozen);
  m.agents[1].signal(SIGCONT);
  // The session is still usable after the stop.
  CHECK(m.eval_json("return 6 * 7") == 42);
}

TEST_CASE("t0211-repl-memory: a chunk allocating without bound hits the session's cap, not the controller") {
  TestMesh m({.agents = 1, .repl_memory_mb = 16});
  m.start();
  auto r = m.eval("local t = {} while true do t[#t + 1] = string.rep('x', 1e6) .. #t end");
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("memory limit") != std::string::npos);
  CHECK(m.controller.running());
  CHECK(m.eval_json("return job.status().nodes.alive") == 1);
}

TEST_CASE("t0212-repl-sessions: each connection has its own environment and the API is read-only") {
  TestMesh m({.agents = 1});
  m.start();
  CHECK(m.eval("counter = 41").ok);
  CHECK(m.eval_json("counter = counter + 1 return counter") == 42);
  repl::Client other(repl::ClientOptions{m.repl_ep});
  REQUIRE(other.connect().ok());
  auto r = other.eval("return counter");
  REQUIRE(r.ok());
  CHECK_FALSE(r->ok);
  CHECK(r->error.find("unknown global 'counter'") != std::string::npos);
  auto w = other.eval("job.kill = nil");
  CHECK(w->error.find("job is read-only") != std::string::npos);
  auto io = other.eval("return io.open('/etc/passwd')");
  CHECK(io->error.find("unknown global 'io'") != std::string::npos);
}

TEST_CASE("t0213-repl-cli: -e prints, --json is JSON, errors exit 1, an absent controller exits 2") {
  TestMesh m({.agents = 2});
  m.start();
  std::string d = m.dir;
  Proc ok = spawn({bin(), "repl", m.repl_ep, "-e", "return job.status().nodes.alive"}, d + "/e1.out");
  CHECK(ok.wait(5000) == 0);
  CHECK(ok.output() == "2\n");
  Proc js = spawn({bin(), "repl", m.repl_ep, "-e", "job.nodes()", "--json"}, d + "/e2.out");
  CHECK(js.wait(5000) == 0);
  auto parsed = nlohmann::json::parse(js.output());
  CHECK(parsed.size() == 2);
  CHECK(parsed[0]["state"] == "alive");
  Proc bad = spawn({bin(), "repl", m.repl_ep, "-e", "error('nope')"}, d + "/e3.out");
  CHECK(bad.wait(5000) == 1);
  CHECK(bad.output().find("nope") != std::string::npos);
  Proc gone = spawn({bin(), "repl", "tcp://127.0.0.1:1", "-e", "1", "--timeout-ms", "300"}, d + "/e4.out");
  CHECK(gone.wait(5000) == 2);
  CHECK(gone.output().find("no answer") != std::string::npos);
}

TEST_CASE("t0214-repl-completion-help: completion and help come from the server's registrations") {
  TestMesh m({.agents = 1});
  m.start();
  repl::Client c(repl::ClientOptions{m.repl_ep});
  REQUIRE(c.connect().ok());
  auto comp = c.complete("x = job.no");
  REQUIRE(comp.ok());
  CHECK(*comp == std::vector<std::string>{"x = job.nodes("});
  auto h = c.eval("help('job.kill')");
  REQUIRE(h.ok());
  CHECK(h->output.find("job.kill(node)") != std::string::npos);
  CHECK(h->output.find("(role: operate)") != std::string::npos);
}

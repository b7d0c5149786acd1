// t0100_heartbeat.cpp — liveness stories on a real loopback mesh: a controller and four agents
// (each with one worker process). Agents are SIGKILLed, frozen, drained and replaced; the
// controller must notice in time, bump the epoch, and never restart. And the reverse: a larger
// model trained with default settings while two threads spin on this machine's cores is never
// declared dead nor killed as unresponsive (busy is not dead).
#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal::test;

namespace {

// The newest node id registered by this process (an agent that re-registers gets a new one).
int64_t node_id_of(TestMesh& m, pid_t pid) {
  int64_t id = -1;
  for (auto& n : m.nodes())
    if (n["pid"] == pid) id = n["id"];
  return id;
}

bool has_event(TestMesh& m, const std::string& kind, int64_t node, const std::string& detail_part = "") {
  for (auto& e : m.eval_json("return job.events(500)"))
    if (e["kind"] == kind && e.value("node", -1) == node &&
        e["detail"].get<std::string>().find(detail_part) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("t0100-heartbeat: a SIGKILLed agent is dead within 400 ms and a new agent joins with a new epoch") {
  TestMesh m;
  m.start();
  pid_t controller_pid = m.controller.pid();
  int64_t victim = node_id_of(m, m.agents[1].pid());
  REQUIRE(victim >= 0);
  int64_t epoch_before = m.status()["epoch"];

  double t0 = now_ms();
  m.agents[1].signal(SIGKILL);
  bool dead = eventually([&] { return m.state_of(victim) == "dead"; }, 2000, 2);
  double took = now_ms() - t0;
  REQUIRE(dead);
  CHECK(took < 400);
  MESSAGE("SIGKILL -> job.nodes() says dead: " << took << " ms");
  CHECK(m.node(victim)["cause"].get<std::string>().find("connection closed") != std::string::npos);
  CHECK(m.status()["epoch"].get<int64_t>() > epoch_before);
  CHECK(m.status()["nodes"]["alive"] == 3);

  int64_t epoch_mid = m.status()["epoch"];
  Proc& fresh = m.add_agent("replacement");
  REQUIRE(eventually([&] { return node_id_of(m, fresh.pid()) >= 0; }, 5000, 10));
  int64_t fresh_id = node_id_of(m, fresh.pid());
  CHECK(fresh_id != victim);
  CHECK(fresh_id == 4);  // ids are never reused
  CHECK(m.status()["epoch"].get<int64_t>() > epoch_mid);
  CHECK(eventually([&] { return m.status()["nodes"]["alive"] == 4; }, 2000));
  CHECK(m.controller.running());
  CHECK(m.controller.pid() == controller_pid);
  CHECK(m.status()["uptime_s"].get<double>() > took / 1000.0);
}

TEST_CASE("t0110-frozen-agent: SIGSTOP makes a node suspect, then dead after 3 missed 100 ms heartbeats") {
  TestMesh m;
  m.start();
  int64_t id = node_id_of(m, m.agents[2].pid());
  double t0 = now_ms();
  m.agents[2].signal(SIGSTOP);
  REQUIRE(eventually([&] { return m.state_of(id) == "dead"; }, 3000, 2));
  double took = now_ms() - t0;
  CHECK(took >= 190);  // it is silence, not a closed connection, that kills it
  CHECK(took < 450);
  MESSAGE("SIGSTOP -> dead: " << took << " ms");
  CHECK(has_event(m, "node_suspect", id));
  CHECK(has_event(m, "node_dead", id, "heartbeats of 100 ms missed"));
  m.agents[2].signal(SIGCONT);
}

// Heartbeats every 2 s here: a report that waited for the next one would come 0-2 s after the kill
// (past the bound 4 times in 5), while one sent on SIGCHLD comes in milliseconds, with room for a
// loaded machine (153 ms once in CI beside another test program).
constexpr int kSlowHeartbeatMs = 2000;
constexpr double kReportedWithinMs = 400;

TEST_CASE("t0120-worker-exit: a killed worker is reported at once, with its signal") {
  MeshOptions o;
  o.heartbeat_ms = kSlowHeartbeatMs;
  TestMesh m(o);
  m.start();
  auto n = m.nodes()[0];
  int64_t id = n["id"];
  pid_t worker = n["workers"][0]["pid"];
  REQUIRE(worker > 0);
  double t0 = now_ms();
  ::kill(worker, SIGKILL);
  REQUIRE(eventually([&] { return m.node(id)["workers"][0]["state"] == "exited"; }, 2000, 2));
  double took = now_ms() - t0;
  CHECK(took < kReportedWithinMs);  // reported by the agent on SIGCHLD, not at the next heartbeat
  CHECK(m.node(id)["workers"][0]["signal"] == SIGKILL);
  CHECK(has_event(m, "worker_exited", id, "killed by signal 9"));
  CHECK(m.status()["workers"]["ready"] == 3);
  // Half a second later its agent starts a new worker on the device (the next index of the slot),
  // and the mesh has four ready workers again; the crashed one stays listed as exited.
  REQUIRE(eventually([&] { return m.status()["workers"]["ready"] == 4; }, 5000, 20));
  auto workers = m.node(id)["workers"];
  REQUIRE(workers.size() == 2);
  CHECK(workers[0]["state"] == "exited");
  CHECK(workers[1]["index"] == 1);
  CHECK(workers[1]["device"] == "cpu:0");
  CHECK(workers[1]["state"] == "ready");
  CHECK(workers[1]["pid"].get<pid_t>() != worker);
  CHECK(has_event(m, "worker_restarted", id,
                  "in place of worker " + std::to_string(id) + ".0 (killed by signal 9); restart 1 of 3"));
}

TEST_CASE("t0123-worker-restart-trains: a worker killed in training comes back as a new worker the job plans in") {
  MeshOptions o;
  o.steps = 100000;
  TestMesh m(o);
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 5; }, 30000, 20));
  int64_t id = m.nodes()[1]["id"];
  ::kill(m.node(id)["workers"][0]["pid"].get<pid_t>(), SIGKILL);
  // first a plan for the three left, then — after the restart — one for four
  REQUIRE(eventually([&] { return has_event(m, "plan_applied", -1, "on 3 workers"); }, 10000, 20));
  REQUIRE(eventually([&] { return m.node(id)["workers"][1]["state"] == "ready"; }, 10000, 20));
  int64_t step = m.status()["step"];
  // a plan in force names the new worker (the join batch's, or a rebalance that came first), and
  // training goes on under it
  const std::string restarted = std::to_string(id) + ".1";
  REQUIRE(eventually([&] {
    auto ranks = m.eval_json("return job.training().ranks");
    return std::find(ranks.begin(), ranks.end(), restarted) != ranks.end();
  }, 10000, 20));
  CHECK(eventually([&] { return m.status()["step"].get<int64_t>() > step + 20; }, 20000, 50));
}

TEST_CASE("t0122-worker-restarts-bounded: a device gets mesh.worker_restarts new workers, then none") {
  MeshOptions o;
  o.mesh_extra = ", worker_restarts = 1";
  TestMesh m(o);
  m.start();
  int64_t id = m.nodes()[2]["id"];
  ::kill(m.node(id)["workers"][0]["pid"].get<pid_t>(), SIGKILL);
  REQUIRE(eventually([&] { return m.node(id)["workers"].size() == 2 && m.status()["workers"]["ready"] == 4; }, 5000, 20));
  CHECK(has_event(m, "worker_restarted", id, "restart 1 of 1"));
  ::kill(m.node(id)["workers"][1]["pid"].get<pid_t>(), SIGKILL);
  REQUIRE(eventually([&] { return m.node(id)["workers"][1]["state"] == "exited"; }, 2000, 5));
  // the second restart would come after 1 s: wait past it
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  CHECK(m.node(id)["workers"].size() == 2);
  CHECK(m.status()["workers"]["ready"] == 3);
  CHECK(m.state_of(id) == "alive");  // the node lives on without a worker
}

TEST_CASE("t0121-frozen-worker: a worker that stops reporting is killed by its agent and reported") {
  TestMesh m;
  m.start();
  auto n = m.nodes()[1];
  int64_t id = n["id"];
  pid_t worker = n["workers"][0]["pid"];
  double t0 = now_ms();
  ::kill(worker, SIGSTOP);
  REQUIRE(eventually([&] { return m.node(id)["workers"][0]["state"] == "exited"; }, 3000, 5));
  double took = now_ms() - t0;
  CHECK(took < 600);
  MESSAGE("worker SIGSTOP -> reported: " << took << " ms");
  CHECK(has_event(m, "worker_exited", id, "unresponsive: silent for"));
  CHECK(m.state_of(id) == "alive");  // the node itself is fine
}

TEST_CASE("t0130-drain: a drained node stops its workers and leaves cleanly") {
  TestMesh m;
  m.start();
  int64_t id = node_id_of(m, m.agents[0].pid());
  int64_t epoch = m.status()["epoch"];
  CHECK(m.eval_json("return job.drain(" + std::to_string(id) + ")") == true);
  REQUIRE(eventually([&] { return m.state_of(id) == "left"; }, 3000, 10));
  CHECK(m.agents[0].wait(3000) == 0);
  CHECK(m.status()["epoch"].get<int64_t>() > epoch);
  CHECK(has_event(m, "node_draining", id));
  CHECK(m.status()["nodes"]["dead"] == 0);
  auto bad = m.eval("job.drain(" + std::to_string(id) + ")");
  CHECK_FALSE(bad.ok);
  CHECK(bad.error.find("is left, not live") != std::string::npos);
}

TEST_CASE("t0140-zombie-node: a node declared dead that wakes up registers again as a new node") {
  TestMesh m;
  m.start();
  int64_t id = node_id_of(m, m.agents[3].pid());
  m.agents[3].signal(SIGSTOP);
  REQUIRE(eventually([&] { return m.state_of(id) == "dead"; }, 3000, 5));
  m.agents[3].signal(SIGCONT);
  // Its next heartbeat is refused (unknown_node); it registers again and gets a new id.
  REQUIRE(eventually([&] {
    for (auto& n : m.nodes())
      if (n["pid"] == m.agents[3].pid() && n["state"] == "alive") return true;
    return false;
  }, 5000, 20));
  CHECK(node_id_of(m, m.agents[3].pid()) != id);
  CHECK(m.state_of(id) == "dead");
  CHECK(m.status()["nodes"]["alive"] == 4);
}

TEST_CASE("t0150-no-false-verdicts: a larger model under a CPU hog loses no node and kills no worker") {
  std::string dir = temp_dir("hog");
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;  // as many spinning threads as a 2-core machine has cores
  for (int i = 0; i < 2; ++i)
    hogs.emplace_back([&] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  // the default job with the model of the report (63 suspects and a node declared dead before)
  auto j = run_json({bin(), "run", "--set", "model.d_model=128,model.layers=4,model.experts=16,model.heads=8", "--steps", "16",
                     "--json", "--out", dir},
                    dir + "/run.out", 240000);
  stop = true;
  for (auto& t : hogs) t.join();
  CHECK(j["steps"] == 16);
  CHECK(j["nodes_lost"] == 0);
  CHECK(j["restores"] == 0);
  size_t dead = 0, unresponsive = 0, suspects = 0;
  for (const auto& e : events(dir)) {
    dead += e.kind == "node_dead";
    suspects += e.kind == "node_suspect";
    unresponsive += e.detail.find("unresponsive") != std::string::npos;
  }
  CHECK(dead == 0);
  CHECK(unresponsive == 0);
  MESSAGE("16 steps under a 2-thread CPU hog: " << suspects << " node_suspect events, " << dead << " dead, "
                                                << unresponsive << " workers killed as unresponsive");
}

// t0510_recovery.cpp — elastic recovery with real processes and real SIGKILLs, driven by drills.
// Six nodes (two more join at the start); one dies in the forward pass, one in a state migration
// (sending state to the joining nodes), one in the all-to-all and one in the gradient all-reduce:
// each time training resumes at the step it was on, no committed step is lost, and the loss curve
// and the final weights match a fault-free run of the same steps up to floating-point
// reassociation. Killing every holder of an expert falls back to the dense snapshot: the steps
// after it run again (bit for bit, the membership being the same size) and training finishes. A
// node dying in the middle of each dense snapshot leaves every one complete (each unit has a second
// writer), and one dying as the final checkpoint begins leaves it whole (the others write it
// again). Worker processes crashed on live hosts come back as new workers. Too few workers left to
// hold the model: the job waits for capacity, counted apart from the recovery's time, and ends
// after mesh.capacity_wait_ms when none comes. A checkpoint-restart restore relaunches its workers
// as new processes, which restore exactly what running workers would. A wrong drill is refused
// with the file, the line and the rule. (Nodes killed during successive plan switches, t0517, are
// timed alone: t0517_switch_losses.cpp.)
#include <doctest/doctest.h>

#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// 8 experts over 4 slots a node: 6 nodes hold 3 replicas of each, 4 nodes still 2.
// health = 'ignore': runs compared bit for bit need the same decisions; a worker starved by the machine's
// other load could be given less work by the default health policy in one run and not the other.
std::string write_job(const std::string& dir, int nodes, const std::string& train = "", const std::string& mesh = "") {
  MeshOptions shape;
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'recovery',\n"
                      << "  model = { layers = 1, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },\n  "
                      << shape.data << "\n  train = { batch = 8, lr = 1e-2, warmup = 5, rebalance_every = 0" << train
                      << " },\n  mesh = { nodes = " << nodes << mesh << " },\n  policies = { slots = 4, health = 'ignore' },\n}\n";
  return path;
}

std::string drill(const std::string& name) { return std::string(SAL_SOURCE_DIR) + "/tests/drills/" + name; }

}  // namespace

TEST_CASE("t0510-kill-at-each-point: a node killed in forward, migration, all-to-all and all-reduce costs no step") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 6);
  auto j = run_json({bin(), "run", job, "--drill", drill("kill_points.lua"), "--json", "--out", dir + "/drill",
                     "--log-level", "debug"},
                    dir + "/drill.out", 90000);
  run_json({bin(), "run", job, "--steps", "16", "--json", "--out", dir + "/plain"}, dir + "/plain.out", 60000);
  CHECK(j["steps"] == 16);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  CHECK(j["samples"] == 16 * 8);
  CHECK(j["recoveries"].size() >= 3);  // a node lost while another's loss is being recovered extends that recovery
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  // each node really died where it was meant to, by its own SIGKILL
  std::string logs = run_logs(dir + "/drill");
  for (const char* point : {"forward", "migration", "alltoall", "allreduce"})
    CHECK_MESSAGE(logs.find(std::string("drill fault at ") + point) != std::string::npos, point);
  // --log-level debug traces the recoveries step by step: the driver's inputs and actions in
  // controller.log, and each worker's plans and step phases in its agent's log
  std::string controller = file_text(dir + "/drill/controller.log");
  for (const char* line : {"driver (running): lost node", "-> decide a plan for", "plan decided", "-> send StepAbort",
                           "-> plan in force", "-> recovery done", "-> committed"})
    CHECK_MESSAGE(controller.find(line) != std::string::npos, std::string(line));
  for (const char* line : {"begins", "votes yes", "committed", "aborted", "applied in"})
    CHECK_MESSAGE(logs.find(line) != std::string::npos, std::string(line));
  // every committed step once, in order: nothing lost, nothing repeated
  auto steps = metrics_column(dir + "/drill", "step");
  REQUIRE(steps.size() == 16);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == double(i));
  // an aborted step is the step training resumes with
  std::string aborted;
  for (const auto& e : events(dir + "/drill")) {
    std::smatch m;
    if (e.kind == "step_aborted" && std::regex_search(e.detail, m, std::regex("^step (\\d+)"))) aborted = m[1];
    if (e.kind == "recovered" && !aborted.empty()) {
      CHECK_MESSAGE(e.detail.find("step " + aborted + " committed") != std::string::npos, e.detail);
      aborted.clear();
    }
  }
  // the same curve as without failures, step by step, and the same weights at the end
  auto a = metrics_column(dir + "/plain", "loss"), b = metrics_column(dir + "/drill", "loss");
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) < 1e-3 * std::abs(a[i]));
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/drill/checkpoint");
  MESSAGE("weights after 16 steps with 4 failures: relative distance per unit: median " << d.median_relative
                                                                                       << ", largest " << d.relative
                                                                                       << "; elementwise " << d.elementwise);
  CHECK(d.units == 1 + 2 + 8);
  // Reassociation over 6, 5, 4 and 8 workers: most units agree to a few 1e-6; an expert whose
  // tokens near a routing tie went the other way once parts a little more (Adam moves an element
  // by up to lr = 1e-2 a step).
  CHECK(d.median_relative < 2e-5);
  CHECK(d.relative < 1e-3);
  CHECK(d.elementwise < 2e-3);
}

TEST_CASE("t0511-lose-every-replica: killing every holder of an expert restores the snapshot and goes on") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 4, ", checkpoint_every = 10, peer_copies = 0");  // the dense rung
  auto j = run_json({bin(), "run", job, "--drill", drill("lose_expert.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  CHECK(j["steps"] == 30);
  CHECK(j["restores"] == 1);
  CHECK(j["lost_steps"] == 7);  // killed after 17 steps, the snapshot is of step 10
  REQUIRE(j["recoveries"].size() == 1);
  CHECK(j["recoveries"][0]["kind"] == "restore");
  CHECK(j["recoveries"][0]["source"] == "disk");  // the ladder's rung: a dense snapshot
  CHECK(j["recoveries"][0]["rerun"] == 7);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  bool begun = false, restored = false;
  for (const auto& e : events(dir + "/run")) {
    begun = begun || (e.kind == "restore_begun" && e.detail.find("snapshot of step 10") != std::string::npos &&
                      e.detail.find("every copy lost: ") != std::string::npos &&
                      e.detail.find("layer 0 expert 3") != std::string::npos);
    restored = restored || e.kind == "restored";
  }
  CHECK(begun);
  CHECK(restored);
  // steps 10..16 ran twice; on as many workers, the second time is the first bit for bit; where the
  // joiners came after the restore's plan (seen on a slow machine: 2 workers, not 4) the sums are
  // reassociated, and the losses agree within that
  auto steps = metrics_column(dir + "/run", "step"), loss = metrics_column(dir + "/run", "loss");
  auto workers = metrics_column(dir + "/run", "workers");
  REQUIRE(steps.size() == 37);
  REQUIRE(workers.size() == steps.size());
  std::map<double, std::pair<double, double>> first;  // step -> its first loss and workers
  int repeated = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto [it, fresh] = first.insert({steps[i], {loss[i], workers[i]}});
    if (fresh) continue;
    ++repeated;
    if (it->second.second == workers[i])
      CHECK(it->second.first == loss[i]);
    else
      CHECK(std::abs(it->second.first - loss[i]) <= 1e-5 * std::abs(it->second.first));
  }
  CHECK(repeated == 7);
  // the report shows the restore
  std::string html = file_text(dir + "/run/report.html");
  CHECK(html.find("restore") != std::string::npos);
}

TEST_CASE("t0523-relaunch: a checkpoint-restart restore relaunches every worker of its plan, which reads the snapshot as a restarted job would") {
  std::string dir = temp_dir("relaunch");
  std::ofstream(dir + "/drill.lua") << "drill{ name = 'one-lost', steps = 30, seed = 3 }\n"
                                    << "kill{ node = 1, step = 17 }\n";
  auto run = [&](const std::string& restart) {
    std::filesystem::create_directories(dir + "/job-" + restart);
    std::string job = write_job(dir + "/job-" + restart, 4, ", checkpoint_every = 10, peer_copies = 0, "
                                "recovery = 'checkpoint-restart', restart = '" + restart + "'");
    std::string out = dir + "/" + restart;
    auto j = run_json({bin(), "run", job, "--drill", dir + "/drill.lua", "--json", "--out", out}, out + ".out", 90000);
    CHECK(j["steps"] == 30);
    CHECK(j["restores"] == 1);
    CHECK(j["lost_steps"] == 7);  // killed after 17 steps, the snapshot is of step 10
    REQUIRE(j["recoveries"].size() == 1);
    CHECK(j["recoveries"][0]["source"] == "disk");
    return out;
  };
  const std::string relaunched = run("relaunch"), in_place = run("in-place");
  // every worker of the restoring plan started again as a new image of itself, its pid kept (its
  // agent saw no exit) and the plan applied there
  const std::string logs = run_logs(relaunched);
  CHECK(occurrences(logs, "restoring as a new process") == 2);  // the plan's one group of two
  CHECK(occurrences(logs, "relaunched as a new process") == 2);
  CHECK(occurrences(logs, "worker 0 exited unexpectedly") == 0);
  CHECK(occurrences(run_logs(in_place), "relaunched as a new process") == 0);
  bool said = false;
  for (const auto& e : events(relaunched))
    said = said || (e.kind == "restore_begun" && e.detail.find("relaunched first") != std::string::npos);
  CHECK(said);
  // the relaunched workers restored exactly what the running ones read: the same losses after the
  // restore, bit for bit, and the same final weights
  CHECK(metrics_column(relaunched, "loss") == metrics_column(in_place, "loss"));
  auto d = weight_distance(relaunched + "/checkpoint", in_place + "/checkpoint");
  CHECK(d.units > 0);
  CHECK(d.elementwise == 0.0);
}

TEST_CASE("t0515-kill-in-every-snapshot: a writer dying in each dense snapshot still leaves them complete") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 6, ", checkpoint_every = 5");
  auto j = run_json({bin(), "run", job, "--drill", drill("snapshot_kills.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  CHECK(j["steps"] == 20);
  CHECK(j["lost_steps"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  // each victim died in its snapshot, by its own hand
  std::string logs = run_logs(dir + "/run");
  for (const char* step : {"5", "10", "15"})
    CHECK_MESSAGE(logs.find(std::string("drill fault at snapshot of step ") + step) != std::string::npos, step);
  // and each of those snapshots completed all the same, none dropped
  std::set<std::string> saved;
  for (const auto& e : events(dir + "/run")) {
    CHECK_MESSAGE(e.kind != "snapshot_dropped", e.detail);
    CHECK_MESSAGE(e.kind != "snapshot_failed", e.detail);
    std::smatch m;
    if (e.kind == "snapshot_saved" && std::regex_search(e.detail, m, std::regex("snapshot of step (\\d+) complete")))
      saved.insert(m[1]);
  }
  for (const char* step : {"5", "10", "15"}) CHECK_MESSAGE(saved.count(step) == 1, step);
  // the newest kept on disk is whole: marked, every unit of the model there, and it resumes
  std::string snap = dir + "/run/snapshots/step-15";
  CHECK(std::ifstream(snap + "/complete").good());
  auto resumed = run_json({bin(), "run", job, "--resume", snap, "--steps", "17", "--json", "--out", dir + "/resumed"},
                          dir + "/resumed.out", 60000);
  CHECK(resumed["steps"] == 17);
  auto steps = metrics_column(dir + "/resumed", "step");
  REQUIRE_FALSE(steps.empty());
  CHECK(steps.front() == 15);
}

TEST_CASE("t0524-final-checkpoint-saver-lost: a node dying as the final checkpoint begins, the others write it whole") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 6);
  auto j = run_json({bin(), "run", job, "--drill", drill("end_kill.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  bool retried = false, saved = false;
  for (const auto& e : events(dir + "/run")) {
    CHECK_MESSAGE(e.kind != "checkpoint_failed", e.detail);
    retried |= e.kind == "checkpoint_retry" && e.detail.find("left before it had saved") != std::string::npos;
    saved |= e.kind == "checkpoint_saved";
  }
  CHECK(retried);  // the kill and the stop come in one drill tick: the save begins before the loss is seen
  REQUIRE(saved);
  REQUIRE(j.contains("checkpoint"));
  // whole: a job resumes from it at the step it says
  int64_t steps = j["steps"];
  auto resumed = run_json({bin(), "run", job, "--resume", j["checkpoint"], "--steps", std::to_string(steps + 2), "--json",
                           "--out", dir + "/resumed"},
                          dir + "/resumed.out", 60000);
  CHECK(resumed["steps"] == steps + 2);
  auto metric_steps = metrics_column(dir + "/resumed", "step");
  REQUIRE_FALSE(metric_steps.empty());
  CHECK(metric_steps.front() == steps);
}

TEST_CASE("t0525-crashed-workers: worker processes crashed on live hosts come back as new workers the job trains on") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 6);
  auto j = run_json({bin(), "run", job, "--drill", drill("crash_workers.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  CHECK(j["steps"].get<int64_t>() > 100);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["nodes_lost"] == 0);  // the hosts lived on
  CHECK(j["workers_restarted"] == 3);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  int crashed = 0, restarted = 0;
  for (const auto& e : events(dir + "/run")) {
    crashed += e.kind == "workers_crashed";
    restarted += e.kind == "worker_restarted" && e.detail.find("(killed by signal 9); restart 1 of 3") != std::string::npos;
  }
  CHECK(crashed == 3);
  CHECK(restarted == 3);
  // the last plan trains on six workers again, three of them the new ones (index 1 of their node)
  std::string last;
  std::ifstream plans(dir + "/run/plans.jsonl");
  for (std::string line; std::getline(plans, line);) last = line;
  auto workers = nlohmann::json::parse(last)["workers"];
  CHECK(workers.size() == 6);
  int renewed = 0;
  for (const auto& w : workers) renewed += w.get<std::string>().ends_with(".1");
  CHECK(renewed == 3);
}

TEST_CASE("t0516-capacity: a job too small to plan waits for capacity apart from its recovery time, and ends after the stated wait") {
  std::string dir = temp_dir("capacity");
  SUBCASE("no capacity comes: the job ends after mesh.capacity_wait_ms, naming why") {
    std::string job = write_job(dir, 2, "", ", capacity_wait_ms = 1500");
    auto j = run_json({bin(), "run", job, "--drill", drill("capacity_gone.lua"), "--json", "--out", dir + "/gone"},
                      dir + "/gone.out", 60000, 1);
    CHECK(j["exit_code"] == 1);
    CHECK(j["failure"].get<std::string>().find("no plan could be made for 1500 ms") != std::string::npos);
    bool waited = false, ended = false;
    for (const auto& e : events(dir + "/gone")) {
      waited = waited || (e.kind == "capacity_wait" && e.detail.find("cannot hold") != std::string::npos);
      ended = ended || (e.kind == "job_failed" && e.detail.find("mesh.capacity_wait_ms") != std::string::npos);
    }
    CHECK(waited);
    CHECK_MESSAGE(ended, file_text(dir + "/gone/events.csv"));
  }
  SUBCASE("capacity comes back: training goes on, the wait is reported apart") {
    std::string job = write_job(dir, 2);
    auto j = run_json({bin(), "run", job, "--drill", drill("capacity_back.lua"), "--json", "--out", dir + "/back"},
                      dir + "/back.out", 90000);
    CHECK(j["exit_code"] == 0);
    CHECK(j["steps"] == 60);
    REQUIRE(j["recoveries"].size() >= 1);
    const auto& r = j["recoveries"][0];
    REQUIRE(r.contains("capacity_wait_s"));
    CHECK(r["capacity_wait_s"].get<double>() > 1.0);  // the new node came ~2 s after the loss
    CHECK(r["seconds"].get<double>() < r["capacity_wait_s"].get<double>());
    CHECK(j["capacity_wait_s"].get<double>() == doctest::Approx(r["capacity_wait_s"].get<double>()));
    for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  }
}

TEST_CASE("t0514-freeze-and-drain: a frozen node is declared dead and rejoins, a drained one leaves, no step lost") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 4);
  auto j = run_json({bin(), "run", job, "--drill", drill("freeze_drain.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  CHECK(j["steps"] == 400);
  CHECK(j["lost_steps"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  std::map<std::string, int> kinds;
  for (const auto& e : events(dir + "/run")) {
    if (e.node == "2" || e.node == "3" || e.kind == "node_joined") ++kinds[e.kind + (e.node.empty() ? "" : ":" + e.node)];
  }
  CHECK(kinds["node_frozen:2"] == 1);
  CHECK(kinds["node_dead:2"] == 1);   // silent past the heartbeat window
  CHECK(kinds["node_thawed:2"] == 1);
  CHECK(kinds["node_draining:3"] == 1);
  CHECK(kinds["node_left:3"] == 1);
  // the thawed agent registered again as a new node and trained
  size_t joins = 0;
  for (const auto& [k, n] : kinds) joins += k.rfind("node_joined", 0) == 0 ? size_t(n) : 0;
  CHECK(joins == 5);
  auto workers = metrics_column(dir + "/run", "workers");
  CHECK(workers.back() == 3);
}

TEST_CASE("t0513-drill-from-the-repl: an operator starts a drill on a live job and watches it act") {
  TestMesh m({.agents = 3, .steps = 1000000000, .train = "batch = 8, rebalance_every = 0"});
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 3; }, 20000));
  std::string path = m.dir + "/repl_drill.lua";
  std::ofstream(path) << "drill{ name = 'from-the-repl', seed = 2 }\nkill{ node = 'random', at_s = 0.2 }\n";
  CHECK(m.eval_json("return drill.start('" + path + "')") == true);
  auto again = m.eval("return drill.start('" + path + "')");
  CHECK_FALSE(again.ok);
  CHECK(again.error.find("already running") != std::string::npos);
  REQUIRE(eventually([&] { return m.eval_json("return drill.status()")["fired"] == 1; }, 10000));
  CHECK(m.eval_json("return drill.status()")["name"] == "from-the-repl");
  REQUIRE(eventually([&] { return m.status()["nodes"]["dead"] == 1; }, 10000));
  // training goes on with the two that are left
  int64_t at = m.status()["step"];
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > at + 5; }, 20000));
  CHECK(m.status()["workers"]["ready"] == 2);
}

TEST_CASE("t0512-bad-drill: a wrong drill is refused with its file, line and rule, before anything starts") {
  std::string dir = temp_dir("recovery");
  std::string job = write_job(dir, 2);
  auto refuse = [&](const std::string& text, const std::string& expect) {
    std::ofstream(dir + "/bad.lua") << text;
    Proc p = spawn({bin(), "run", job, "--drill", dir + "/bad.lua", "--out", dir + "/out"}, dir + "/bad.out");
    CHECK(p.wait(20000) == 1);
    INFO(p.output());
    CHECK(p.output().find(expect) != std::string::npos);
  };
  refuse("drill{ name = 'x' }\nkill{ nod = 2, step = 3 }\n", "bad.lua:2: kill: unknown field 'nod' (did you mean 'node'?)");
  refuse("kill{ node = 2, step = 3, during = 'optimizer' }\n", "bad.lua:1: kill.during: 'optimizer' is not a point of the step");
  refuse("kill{ node = 2 }\n", "bad.lua:1: kill: give exactly one of step");
  refuse("replay_trace{ file = 'missing.csv' }\n", "missing.csv");
  refuse("drill{ name = 'nothing' }\n", "the drill schedules nothing");
}

namespace {

// 8 experts x 2 replicas on 4 agents of two workers x 2 slots (mro), `mesh` naming more mesh keys,
// run under `drill_file`; checks what every such run must show: 40 steps, none lost, no restore.
std::pair<nlohmann::json, std::string> domain_kill(const std::string& name, const std::string& mesh,
                                                   const std::string& drill_file) {
  std::string dir = temp_dir(name);
  std::string job = write_job(dir, 4, "", ", devices = 'cpu:2'" + mesh);
  std::string text = file_text(job);
  const std::string policies = "policies = { slots = 4, health = 'ignore' }";
  text.replace(text.find(policies), policies.size(), "policies = { slots = 2, placement = 'mro', health = 'ignore' }");
  std::ofstream(job) << text;
  auto j = run_json({bin(), "run", job, "--drill", drill(drill_file), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  CHECK(j["exit_code"] == 0);
  CHECK(j["steps"] == 40);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  auto steps = metrics_column(dir + "/run", "step");  // every committed step once, in order
  REQUIRE(steps.size() == 40);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == double(i));
  return {j, dir};
}

}  // namespace

TEST_CASE("t0518-host-kill: hosts of two workers, one host killed: every expert was on two hosts, nothing restored, no step lost") {
  // 8 experts x 2 replicas fill 4 hosts x 2 workers x 2 slots: room for every expert on two hosts.
  // mro's blocks put both replicas of two experts on two positions; taken in order, those were
  // the two workers of one host.
  auto [j, dir] = domain_kill("hosts", "", "host_kill.lua");
  // the host really went, both workers with it, and the plans said so
  bool two_gone = false, on_hosts = false;
  for (const auto& e : events(dir + "/run")) {
    two_gone = two_gone || (e.kind == "node_dead" || e.kind == "node_left");
    on_hosts = on_hosts || (e.kind == "plan" && e.detail.find("on 4 hosts") != std::string::npos);
  }
  CHECK(two_gone);
  CHECK_MESSAGE(on_hosts, file_text(dir + "/run/events.csv"));
}

TEST_CASE("t0521-rack-kill: hosts of two workers in two racks, one rack killed: every expert was on both racks, nothing restored, no step lost") {
  // t0518's shape, the four local agents in two racks by their names
  auto [j, dir] = domain_kill("racks", ", racks = 'a: node0 node1; b: node2 node3'", "rack_kill.lua");
  // the rack really went (both its nodes, at once), and the plans said where they ran
  std::map<std::string, std::string> name_of;  // node id -> name, from its join ("node2 from ...")
  std::set<std::string> dead;
  bool in_racks = false;
  for (const auto& e : events(dir + "/run")) {
    if (e.kind == "node_joined") name_of[e.node] = e.detail.substr(0, e.detail.find(' '));
    if (e.kind == "node_dead") dead.insert(name_of[e.node]);
    in_racks = in_racks || (e.kind == "plan" && e.detail.find("on 4 hosts in 2 racks") != std::string::npos);
  }
  CHECK(dead == std::set<std::string>{"node2", "node3"});
  CHECK_MESSAGE(in_racks, file_text(dir + "/run/events.csv"));
}

TEST_CASE("t0519-plan-over-hosts: job.plan() says each position's host and P(k) over hosts") {
  MeshOptions o;
  o.agents = 4;
  o.devices = "cpu:2";
  o.model = "model = { layers = 1, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },";
  o.extra = "policies = { slots = 2, min_replicas = 2 },";
  TestMesh m(o);
  m.start();
  REQUIRE(eventually([&] { return m.eval_json("local p = job.plan() return p and p.nodes") == 8; }, 5000, 20));
  auto plan = m.eval_json("return job.plan(0)");
  CHECK(plan["hosts"] == 4);
  REQUIRE(plan["domains"].size() == 8);
  REQUIRE(plan["p_hosts"].size() == 3);
  CHECK(plan["p_hosts"][0] == 1.0);  // any one host lost: every expert still held
  // no host holds both replicas of an expert
  std::map<int, std::map<int, int>> on_host;  // host -> expert -> replicas
  for (size_t pos = 0; pos < 8; ++pos)
    for (int e : plan["layer"]["placement"][pos]) ++on_host[plan["domains"][pos].get<int>()][e];
  for (const auto& [host, experts] : on_host)
    for (const auto& [e, n] : experts) CHECK_MESSAGE(n == 1, "host " << host << " expert " << e);
}

TEST_CASE("t0522-plan-over-racks: job.plan() says each host's rack and P(k) over racks, every expert on both racks") {
  MeshOptions o;
  o.agents = 4;
  o.devices = "cpu:2";
  o.mesh_extra = ", racks = 'a: node0 node1; b: node2 node3'";
  o.model = "model = { layers = 1, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },";
  o.extra = "policies = { slots = 2, min_replicas = 2, placement = 'mro' },";
  TestMesh m(o);
  m.start();
  REQUIRE(eventually([&] { return m.eval_json("local p = job.plan() return p and p.nodes") == 8; }, 5000, 20));
  auto plan = m.eval_json("return job.plan(0)");
  CHECK(plan["hosts"] == 4);
  CHECK(plan["racks"] == 2);
  REQUIRE(plan["rack_of_host"].size() == 4);
  REQUIRE(plan["p_racks"].size() == 3);
  CHECK(plan["p_racks"][0] == 1.0);  // either rack lost: every expert still held
  CHECK(plan["p_hosts"][0] == 1.0);
  // two hosts in each rack, as mesh.racks names them
  std::map<int, int> hosts_in;
  for (const auto& r : plan["rack_of_host"]) ++hosts_in[r.get<int>()];
  CHECK(hosts_in == std::map<int, int>{{0, 2}, {1, 2}});
  std::map<int, std::set<int>> experts_on_rack;
  for (size_t pos = 0; pos < 8; ++pos) {
    int rack = plan["rack_of_host"][plan["domains"][pos].get<size_t>()].get<int>();
    for (int e : plan["layer"]["placement"][pos]) experts_on_rack[rack].insert(e);
  }
  REQUIRE(experts_on_rack.size() == 2);
  for (const auto& [rack, experts] : experts_on_rack) CHECK_MESSAGE(experts.size() == 8, "rack " << rack);
}

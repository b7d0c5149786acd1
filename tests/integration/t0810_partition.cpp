// t0810_partition.cpp — a real network partition. Three agents, each in a network namespace of its
// own, reach the controller (in the test's namespace) over veth pairs and a bridge, with CURVE, all
// started by scripts/slurm/launch.sh as the Slurm example starts them. Mid-training one node's link
// is taken down: the controller declares it dead within the liveness window and training goes on
// without it; the cut-off agent fences within the window (its worker abandons the step in flight)
// and its worker commits nothing until it has joined again; when the link returns, the node
// registers again, as a join, and trains with the others.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include "support/mesh_harness.h"
#include "support/netns.h"
#include "support/netns_lab.h"
#include "wire/curve.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr int kNodes = 3;
constexpr int kCut = 2;  // the node whose link is cut
constexpr int kHeartbeatMs = 100, kMissLimit = 3;
constexpr double kWindowMs = kHeartbeatMs * (kMissLimit + 1);  // the liveness window
// How late after the window an observation may come on a loaded 2-core machine: the agent checks
// its silence every 200 ms, and the test polls the REPL.
constexpr double kSlackMs = 300;

std::string launch_sh() { return SAL_SOURCE_DIR "/scripts/slurm/launch.sh"; }

// launch.sh SUBCOMMAND ARGS with the settings of this run (env VAR=… launch.sh …).
std::vector<std::string> launch(const NetnsLab& lab, const std::string& run_dir, std::vector<std::string> vars,
                                const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/env", "SALAMANDER=" + bin(), "SAL_RUN_DIR=" + run_dir,
                                "SAL_CONTROLLER_ADDR=" + lab.controller_address()};
  argv.insert(argv.end(), vars.begin(), vars.end());
  argv.push_back(launch_sh());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string write_job(const std::string& dir) {
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'partition',\n"
                      << "  model = { layers = 1, d_model = 16, heads = 2, experts = 4, top_k = 2, seq_len = 16 },\n"
                      << "  data = { path = '" << docs_dir() << "' },\n"
                      << "  train = { steps = 1000000, batch = 8, lr = 1e-2, warmup = 5, rebalance_every = 0, "
                         "checkpoint_every = 0 },\n"
                      << "  mesh = { nodes = " << kNodes << ", heartbeat_ms = " << kHeartbeatMs
                      << ", miss_limit = " << kMissLimit << " },\n"
                      << "  policies = { slots = 4 },\n}\n";
  return path;
}

int64_t node_id(repl::Client& admin, const std::string& name) {
  int64_t id = -1;
  for (auto& n : repl_json(admin, "return job.nodes(true)"))
    if (n["name"] == name && n["state"] == "alive") id = n["id"];
  return id;
}

nlohmann::json node(repl::Client& admin, int64_t id) {
  for (auto& n : repl_json(admin, "return job.nodes(true)"))
    if (n["id"] == id) return n;
  return nlohmann::json::object();
}

int64_t last_workers(repl::Client& admin) {
  return repl_json(admin, "local r = job.metrics(1).recent return r[#r] and r[#r].workers or 0");
}

// The worker's step lines ("step N of epoch E begins|committed") in a stretch of a node's log.
struct StepLine {
  int64_t step, epoch;
  std::string what;
};
std::vector<StepLine> step_lines(const std::string& text) {
  std::vector<StepLine> out;
  std::regex line("step (\\d+) of epoch (\\d+) (begins|committed)");
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it)
    out.push_back({std::stoll((*it)[1]), std::stoll((*it)[2]), (*it)[3]});
  return out;
}

}  // namespace

TEST_CASE("t0810-partition: a node cut off by its link is declared dead and fenced, commits nothing, and rejoins when the link returns") {
  std::unique_ptr<NetnsLab> lab;
  try {
    lab = std::make_unique<NetnsLab>(kNodes);
  } catch (const LabUnavailable& e) {
    std::printf("skipped: cannot build the namespaces of a partition: %s\n", e.what());
    std::fflush(stdout);
    std::_Exit(77);  // nothing of the lab is left (it removed what it made)
  }
  std::string dir = temp_dir("partition");
  REQUIRE(spawn(launch(*lab, dir, {}, {"keys"}), dir + "/keys.out").wait(10000) == 0);
  Proc controller = spawn(launch(*lab, dir, {}, {"controller", write_job(dir), "--log-level", "debug"}),
                          dir + "/controller.out");
  std::string repl_ep = controller.wait_for_line("repl ", 5000);
  REQUIRE_MESSAGE(!repl_ep.empty(), controller.output());
  std::vector<Proc> agents;
  for (int k = 0; k < kNodes; ++k) {
    std::vector<std::string> vars{"SAL_NODE_NAME=node" + std::to_string(k), "SAL_DATA_HOST=" + lab->address(k)};
    agents.push_back(spawn(lab->inside(k, launch(*lab, dir, vars, {"agent", "--log-level", "debug"})),
                           dir + "/node" + std::to_string(k) + ".out"));
  }
  auto server = wire::resolve_public_key(dir + "/keys/ctl.pub");
  REQUIRE(server.ok());
  repl::Client admin(repl::ClientOptions{repl_ep, *server, dir + "/keys/admin.key", 5000});
  REQUIRE(admin.connect().ok());
  REQUIRE_MESSAGE(eventually([&] { return repl_json(admin, "return job.status().step").get<int64_t>() >= 20; }, 30000, 50),
                  controller.output());
  CHECK(last_workers(admin) == kNodes);
  int64_t cut_id = node_id(admin, "node" + std::to_string(kCut));
  REQUIRE(cut_id >= 0);
  Proc& cut_agent = agents[kCut];

  // The cut: the controller declares the node dead within the window, and goes on without it.
  double t_cut = now_ms();
  lab->cut(kCut);
  REQUIRE(eventually([&] { return node(admin, cut_id).value("state", "") == "dead"; }, 5000, 2));
  double dead_ms = now_ms() - t_cut;
  CHECK_MESSAGE(node(admin, cut_id).value("cause", "").find("silent for") == 0, node(admin, cut_id).dump());
  int64_t step_at_death = repl_json(admin, "return job.status().step");
  REQUIRE(eventually([&] { return cut_agent.output().find("no word from the controller for") != std::string::npos; },
                     5000, 2));
  double fenced_ms = now_ms() - t_cut;
  MESSAGE("link down -> node declared dead: " << dead_ms << " ms; -> its agent fences: " << fenced_ms
                                               << " ms (liveness window " << kWindowMs << " ms)");
  CHECK(dead_ms < kWindowMs + kSlackMs);
  CHECK(fenced_ms < kWindowMs + kSlackMs);
  CHECK(eventually([&] { return repl_json(admin, "return job.status().step").get<int64_t>() >= step_at_death + 10; },
                   10000, 20));
  CHECK(last_workers(admin) == kNodes - 1);
  CHECK(cut_agent.running());  // alive, cut off: it rides the partition out
  double down_ms = now_ms() - t_cut;
  if (down_ms < 1500) std::this_thread::sleep_for(std::chrono::milliseconds(int(1500 - down_ms)));

  // The link returns: the node registers again (a join, under a new id) and trains with the others.
  lab->heal(kCut);
  double t_heal = now_ms();
  REQUIRE_MESSAGE(eventually([&] { return node_id(admin, "node" + std::to_string(kCut)) > cut_id; }, 15000, 20),
                  cut_agent.output());
  double rejoined_ms = now_ms() - t_heal;
  REQUIRE_MESSAGE(eventually([&] { return last_workers(admin) == kNodes; }, 15000, 20), controller.output());
  double training_ms = now_ms() - t_heal;
  MESSAGE("link up -> registered again: " << rejoined_ms << " ms; -> trains with the others: " << training_ms << " ms");
  int64_t step_at_rejoin = repl_json(admin, "return job.status().step");
  REQUIRE(eventually([&] { return repl_json(admin, "return job.status().step").get<int64_t>() >= step_at_rejoin + 10; },
                     10000, 20));

  // The cut-off node's own log: between its fencing and its new registration its worker commits
  // nothing. The only step it may begin is a stale one, queued by the controller before the death
  // and delivered when the link returns: of the epoch the node was cut off in, failing at once on
  // the data plane its fencing ended. After the registration it commits steps of the new
  // membership only, from where the others are.
  std::string log = cut_agent.output();
  size_t fence = log.find("no word from the controller for");
  size_t again = log.find("registered as node", fence);
  REQUIRE(again != std::string::npos);
  CHECK(log.find("the controller is heard again", fence) < again);
  int64_t cut_epoch = -1;
  for (const auto& s : step_lines(log.substr(0, fence))) cut_epoch = s.epoch;
  std::string fenced = log.substr(fence, again - fence);
  for (const auto& s : step_lines(fenced)) {
    CHECK_MESSAGE(s.what == "begins", fenced);
    CHECK(s.epoch == cut_epoch);
    CHECK_MESSAGE(fenced.find("step " + std::to_string(s.step) + " failed") != std::string::npos, fenced);
  }
  std::smatch m;
  std::string after = log.substr(again);
  REQUIRE(std::regex_search(after, m, std::regex("registered as node (\\d+) of job '[^']*' \\(epoch (\\d+)")));
  CHECK(std::stoll(m[1]) > cut_id);
  int64_t rejoin_epoch = std::stoll(m[2]);
  int64_t commits = 0;
  for (const auto& s : step_lines(after)) {
    CHECK(s.epoch >= rejoin_epoch);
    if (s.what != "committed") continue;
    ++commits;
    CHECK(s.step > step_at_death);
  }
  CHECK(commits >= 5);
  // The cut node's last commit before the cut was one the others committed too, before its death.
  int64_t before_max = -1;
  for (const auto& s : step_lines(log.substr(0, fence)))
    if (s.what == "committed") before_max = std::max(before_max, s.step);
  CHECK(before_max >= 0);
  CHECK(before_max < step_at_death);
}

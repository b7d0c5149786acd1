// t0550_sparse_restore.cpp — the sparse rung of the recovery ladder with real processes (MoEtion in
// peers' memory): six nodes, each worker putting its slots of a four-iteration window to two other
// nodes' agents; every holder of an expert is SIGKILLed and three fresh nodes join. The job
// restores from the window in the surviving agents' memory (no dense snapshot exists: nothing is
// read from disk), replays it with operators frozen, re-executes to where it was, and ends with
// the weights of a run that never failed, bit for bit. A slice that fails its checksum in every
// agent sends the restore to the next rung, the dense snapshot, and each step of that is an event.
// With windows of one iteration, a window of the survivors' own step is restored by fetching only
// what they lack (t0556).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// t0510's model (8 experts over 4 slots a node: 6 nodes hold 3 replicas of each) with the
// quarters checkpoint policy (a window of 4).
// health = 'ignore': runs compared bit for bit need the same decisions; a worker starved by the machine's
// other load could be given less work by the default health policy in one run and not the other.
std::string write_job(const std::string& dir, int nodes, const std::string& train, const std::string& mesh = "") {
  MeshOptions shape;
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'sparse-restore',\n"
                      << "  model = { layers = 1, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },\n  "
                      << shape.data << "\n  train = { batch = 8, lr = 1e-2, warmup = 5, rebalance_every = 0" << train
                      << " },\n  mesh = { nodes = " << nodes << mesh << " },\n  policies = { slots = 4, checkpoint = '"
                      << SAL_SOURCE_DIR << "/tests/policies/quarters.lua', health = 'ignore' },\n}\n";
  return path;
}

std::string drill(const std::string& name) { return std::string(SAL_SOURCE_DIR) + "/tests/drills/" + name; }

bool has_event(const std::string& run, const std::string& kind, const std::string& part) {
  for (const auto& e : events(run))
    if (e.kind == kind && e.detail.find(part) != std::string::npos) return true;
  return false;
}

// An event naming the newest window the kill at step 117 can find whole in the peers' memory: 112..115,
// or 108..111 where 112's copies were still being put when the kill came (seen in CI under load).
bool in_newest_window(const std::string& run, const std::string& kind, const std::string& before,
                      const std::string& after) {
  for (const char* window : {"112", "108"})
    if (has_event(run, kind, before + window + after)) return true;
  return false;
}

// lose_expert_peers.lua on six nodes (the joiners wait — a join batch longer than the run — until the
// loss re-plans: the recovery runs on six workers again, as the plain run does), and a plain run of
// its 130 steps beside it (dir/run, dir/plain). Returns the drill's summary: 130 steps, one restore.
nlohmann::json lose_expert_beside_plain(const std::string& dir, const std::string& train) {
  std::string job = write_job(dir, 6, ", checkpoint_every = 0" + train, ", join_batch_ms = 600000");
  auto j = run_json({bin(), "run", job, "--drill", drill("lose_expert_peers.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 120000);
  run_json({bin(), "run", job, "--steps", "130", "--json", "--out", dir + "/plain"}, dir + "/plain.out", 60000);
  CHECK(j["steps"] == 130);
  CHECK(j["restores"] == 1);
  REQUIRE(j["recoveries"].size() == 1);
  return j;
}

}  // namespace

TEST_CASE("t0550-sparse-restore: every holder of an expert killed, the window in peers' memory restores it and the run ends bit for bit as if it never failed") {
  std::string dir = temp_dir("sparse-restore");
  auto j = lose_expert_beside_plain(dir, "");
  CHECK(j["lost_steps"] == 0);  // the replay reproduces every committed step
  CHECK(j["recoveries"][0]["source"] == "peers");
  // killed after 117 steps: the newest complete window is 112..115 (108..111 where 112's copies
  // were still being put when the kill came, seen in CI under load); from 112..115 the state of
  // step 113 comes from its slot 0, iterations 113..115 are replayed and 116 re-executed
  const bool older = has_event(dir + "/run", "restore_begun", "the sparse window of iterations 108..111");
  const std::string window = older ? "108..111" : "112..115";
  const int rerun = older ? 8 : 4;
  CHECK(j["recoveries"][0]["rerun"] == rerun);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  CHECK(has_event(dir + "/run", "restore_begun", "the sparse window of iterations " + window));
  CHECK(has_event(dir + "/run", "restore_begun", "on 6 workers"));
  CHECK(has_event(dir + "/run", "restore_begun", "no committed step is lost"));
  CHECK(has_event(dir + "/run", "restored", "sparse window"));
  CHECK_FALSE(has_event(dir + "/run", "sparse_restore_failed", ""));
  std::string logs = run_logs(dir + "/run");
  CHECK(logs.find("loaded from the sparse window " + window + " in peers' memory") != std::string::npos);
  CHECK(logs.find("the sparse window is replayed") != std::string::npos);
  // steps 113..116 (109..116) ran twice, on as many workers: the second time is the first, bit for bit
  auto steps = metrics_column(dir + "/run", "step"), loss = metrics_column(dir + "/run", "loss");
  REQUIRE(steps.size() == size_t(130 + rerun));
  std::map<double, double> first;
  int repeated = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto [it, fresh] = first.insert({steps[i], loss[i]});
    if (fresh) continue;
    CHECK(it->second == loss[i]);
    ++repeated;
  }
  CHECK(repeated == rerun);
  CHECK(metrics_column(dir + "/run", "workers").back() == 6);
  // and the weights at the end are those of the run without the failure
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/run/checkpoint");
  CHECK(d.units == 1 + 2 + 8);
  CHECK(d.elementwise == 0);
}

TEST_CASE("t0555-expert-rebuild: every holder of an expert killed, its new holders rebuild it from its copy and the upstream logs, nobody rolls back, and the run ends bit for bit as if it never failed") {
  std::string dir = temp_dir("sparse-restore");
  auto j = lose_expert_beside_plain(dir, ", expert_logs = true");
  CHECK(j["lost_steps"] == 0);
  CHECK(j["recoveries"][0]["source"] == "logs");
  CHECK(j["recoveries"][0]["rerun"] == 0);  // nobody rolls back: no step runs again
  MESSAGE("recovery (loss to the next commit): " << j["recoveries"][0]["seconds"] << " s");
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  // ranks 0..2 held experts 0..3 three times over: all four lost
  CHECK(has_event(dir + "/run", "rebuild_begun", "rebuilding 4 lost experts (every copy lost: layer 0 expert 0, layer 0 expert 1"));
  CHECK(has_event(dir + "/run", "rebuild_begun", "nobody rolls back"));
  CHECK(has_event(dir + "/run", "restored", "upstream logs"));
  CHECK_FALSE(has_event(dir + "/run", "rebuild_failed", ""));
  CHECK_FALSE(has_event(dir + "/run", "restore_begun", ""));
  // each rebuilt once, the replays spread over their new holders
  std::multiset<std::string> rebuilt;
  const std::string logs = run_logs(dir + "/run");
  const std::regex line("lost experts from the upstream logs: ([a-z0-9., ]+) \\(");
  for (auto it = std::sregex_iterator(logs.begin(), logs.end(), line); it != std::sregex_iterator(); ++it) {
    std::stringstream names((*it)[1].str());
    for (std::string n; std::getline(names >> std::ws, n, ',');) rebuilt.insert(n);
  }
  CHECK(rebuilt == std::multiset<std::string>{"layer0.expert0", "layer0.expert1", "layer0.expert2", "layer0.expert3"});
  // every step ran once
  auto steps = metrics_column(dir + "/run", "step");
  CHECK(steps.size() == 130);
  CHECK(metrics_column(dir + "/run", "workers").back() == 6);
  // and the weights at the end are those of the run without the failure
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/run/checkpoint");
  CHECK(d.units == 1 + 2 + 8);
  CHECK(d.elementwise == 0);
}

TEST_CASE("t0557-log-copies: with train.log_copies = 1 each upstream log has one holder: where it died with the experts' holders the rebuild says which log is gone, the sparse rung restores, and the run ends bit for bit as if it never failed") {
  // the job of t0555, its logs put to each rank's first slice peer alone: the first peer of a rank
  // that survives (one holding none of experts 0..3) is one of the killed nodes that hold them, so
  // with one copy its logs of the window are on no live agent (with two, t0555 rebuilds)
  std::string dir = temp_dir("sparse-restore");
  auto j = lose_expert_beside_plain(dir, ", expert_logs = true, log_copies = 1");
  CHECK(j["expert_logs"]["copies"] == 1);
  CHECK(has_event(dir + "/run", "rebuild_begun", "rebuilding 4 lost experts"));
  CHECK(has_event(dir + "/run", "rebuild_failed", "is held soundly by no live agent"));
  CHECK(has_event(dir + "/run", "rebuild_failed", "falling back to the sparse rung"));
  CHECK(j["recoveries"][0]["source"] == "peers");
  CHECK(j["lost_steps"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/run/checkpoint");
  CHECK(d.units == 1 + 2 + 8);
  CHECK(d.elementwise == 0);
}

TEST_CASE("t0556-sparse-restore-own-step: with windows of one iteration the survivors keep what they hold and fetch only the lost experts, and the run ends bit for bit as if it never failed") {
  // one replica of each expert (8 on 4 nodes of 2 slots), windows of one iteration; node 1 killed at
  // the end of step 12 (its gradient sync), so the newest window is step 11's, the state the
  // survivors hold — its slots are put and reported while step 12 computes (steps of 0.2-0.3 s here)
  std::string dir = temp_dir("sparse-restore");
  std::string job = dir + "/job.lua";
  std::ofstream(job) << "return {\n  name = 'sparse-restore-own-step',\n"
                     << "  model = { layers = 1, d_model = 128, heads = 2, experts = 8, top_k = 2, seq_len = 64 },\n  "
                     << MeshOptions{}.data << "\n  train = { batch = 64, lr = 1e-2, warmup = 5, rebalance_every = 0, "
                     << "checkpoint_every = 0 },\n  mesh = { nodes = 4, join_batch_ms = 600000 },\n  policies = { "
                     << "slots = 2, min_replicas = 1, checkpoint = '" << SAL_SOURCE_DIR
                     << "/tests/policies/whole.lua', health = 'ignore' },\n}\n";
  auto j = run_json(
      {bin(), "run", job, "--drill", drill("lose_expert_peers_early.lua"), "--json", "--out", dir + "/run"},
      dir + "/run.out", 120000);
  run_json({bin(), "run", job, "--steps", "20", "--json", "--out", dir + "/plain"}, dir + "/plain.out", 60000);
  CHECK(j["steps"] == 20);
  REQUIRE(j["recoveries"].size() == 1);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["recoveries"][0]["source"] == "peers");
  CHECK(j["recoveries"][0]["rerun"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  CHECK(has_event(dir + "/run", "restore_begun", "the sparse window of iterations 11..11"));
  // the node that joined holds nothing yet: every unit fetched (the embedding, dense and gate units
  // and its two experts); the three survivors keep what they held and fetch the lost experts
  const std::regex line("plan \\d+: (\\d+) units \\(\\d+ bytes\\) loaded from the sparse window 11\\.\\.11 in peers' "
                        "memory(, (\\d+) kept: this worker's state is that iteration's)?$");
  size_t keepers = 0, fetched_all = 0;
  std::stringstream lines(run_logs(dir + "/run"));
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    const int loaded = std::stoi(m[1].str()), kept = m[3].matched ? std::stoi(m[3].str()) : 0;
    CHECK(loaded + kept == 3 + 2);
    if (m[3].matched) CHECK(kept >= 3);
    ++(m[3].matched ? keepers : fetched_all);
  }
  CHECK(keepers == 3);
  CHECK(fetched_all == 1);
  CHECK(metrics_column(dir + "/run", "step").size() == 20);
  CHECK(metrics_column(dir + "/run", "workers").back() == 4);
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/run/checkpoint");
  CHECK(d.units == 1 + 2 + 8);
  CHECK(d.elementwise == 0);
}

TEST_CASE("t0552-sparse-restore-fewer: with nobody to replace the killed holders, the survivors restore from peers and end within reassociation of the fault-free run") {
  std::string dir = temp_dir("sparse-restore");
  std::string job = write_job(dir, 6, ", checkpoint_every = 0");
  auto j = run_json({bin(), "run", job, "--drill", drill("lose_expert_peers_alone.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 120000);
  run_json({bin(), "run", job, "--steps", "30", "--json", "--out", dir + "/plain"}, dir + "/plain.out", 60000);
  run_json({bin(), "run", job, "--steps", "29", "--json", "--out", dir + "/step29"}, dir + "/step29.out", 60000);
  CHECK(j["steps"] == 30);
  REQUIRE(j["recoveries"].size() == 1);
  CHECK(j["recoveries"][0]["source"] == "peers");
  CHECK(j["lost_steps"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  CHECK(metrics_column(dir + "/run", "workers").back() == 3);
  // on 3 workers instead of 6 for the last 17 steps: the same sums in another order, and a routing tie
  // that goes the other way moves an expert by up to lr a step; how often depends on the placement
  // the loss got, which depends on the timings the plan was decided with (measured: median 6e-7 to
  // 4e-4, largest 1e-4 to 4e-3). Measured against what one step moves the weights (29 to 30 steps of
  // the run without the failure: median 3e-2, largest 7e-2 here): a restore a step behind, or one that
  // lost a unit's update, is a whole step off where it matters.
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/run/checkpoint");
  auto step = weight_distance(dir + "/step29/checkpoint", dir + "/plain/checkpoint");
  MESSAGE("weights after 30 steps, 3 workers from step 13: relative distance per unit: median "
          << d.median_relative << ", largest " << d.relative << "; elementwise " << d.elementwise
          << "; one step (29 to 30) moves them: median " << step.median_relative << ", largest " << step.relative
          << "; elementwise " << step.elementwise);
  CHECK(d.median_relative < 0.05 * step.median_relative);
  CHECK(d.relative < 0.2 * step.relative);
  CHECK(d.elementwise < 0.2 * step.elementwise);
  // and the bounds tell a state one step off: the restored run against the 29 steps fails them
  auto off = weight_distance(dir + "/step29/checkpoint", dir + "/run/checkpoint");
  CHECK(off.median_relative >= 0.05 * step.median_relative);
  CHECK(off.relative >= 0.2 * step.relative);
}

TEST_CASE("t0551-sparse-fallback: a corrupt slice is found by its checksum and the next replica serves, and corrupt in every agent the restore falls to the dense snapshot, each step an event") {
  std::string dir = temp_dir("sparse-restore");
  // three copies: rank 0 (writing experts 0..3) puts its slots to the node of rank 3 (holding none
  // of them), of rank 1 (holding them) and of rank 4; the drill kills ranks 0..2, rank 1's node a
  // replica; the fetch asks the survivors in node order
  // dense snapshots every 20 steps (9.5 steps run again on average against the window of 4's 5.5: with
  // every 10, 4.5, the sparse snapshots would not be taken at all; plan/schedule.h)
  std::string job = write_job(dir, 6, ", checkpoint_every = 20, peer_copies = 3", ", join_batch_ms = 600000");
  setenv("SAL_TEST_CORRUPT_SLICE", "layer0.expert3@3", 1);  // in node 3's agent (inherited by the run's agents)
  auto j = run_json({bin(), "run", job, "--drill", drill("lose_expert_peers.lua"), "--json", "--out", dir + "/one"},
                    dir + "/one.out", 120000);
  setenv("SAL_TEST_CORRUPT_SLICE", "layer0.expert3", 1);  // now in every agent
  auto k = run_json({bin(), "run", job, "--drill", drill("lose_expert_peers.lua"), "--json", "--out", dir + "/all"},
                    dir + "/all.out", 120000);
  unsetenv("SAL_TEST_CORRUPT_SLICE");

  // node3's copy fails its checksum, node4's serves: restored from peers, nothing lost
  REQUIRE(j["recoveries"].size() == 1);
  CHECK(j["recoveries"][0]["source"] == "peers");
  CHECK(j["lost_steps"] == 0);
  CHECK(in_newest_window(dir + "/one", "slice_fallback", "layer0.expert3 from the window from iteration ",
                         ": node 3: its copy"));
  CHECK(has_event(dir + "/one", "slice_fallback", "fails its checksum; asking node 4"));
  CHECK_FALSE(has_event(dir + "/one", "sparse_restore_failed", ""));
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());

  // every copy corrupt: both tried, then the dense snapshot of step 100
  CHECK(k["steps"] == 130);
  REQUIRE(k["recoveries"].size() == 1);
  CHECK(k["recoveries"][0]["source"] == "disk");
  CHECK(k["lost_steps"] == 17);  // 100..116
  CHECK(has_event(dir + "/all", "slice_fallback", "fails its checksum; asking node 4"));
  CHECK(in_newest_window(dir + "/all", "sparse_restore_failed", "no good copy in the window from iteration ", ""));
  CHECK(has_event(dir + "/all", "sparse_restore_failed", "falling back to the dense snapshot"));
  CHECK(has_event(dir + "/all", "restore_begun", "snapshot of step 100"));
  for (const auto& e : k["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
}

TEST_CASE("t0553-sparse-policy-swap: the checkpoint policy swapped live (moetion, dense, moetion), then an expert lost: the restore is from peers and training goes on") {
  // four copies of each slot on the five other nodes: three nodes lost leave every writer's window a
  // live copy, whichever ranks the nodes got (with two, a survivor's two peers can both be among
  // the three killed: the restore then falls to the seed)
  TestMesh m({.agents = 6, .steps = 1000000000,
              .model = "model = { layers = 1, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },",
              .train = "batch = 8, rebalance_every = 0, checkpoint_every = 0, peer_copies = 4",
              .extra = "policies = { slots = 4 },"});
  m.start();
  // every node in the plan first: a plan that takes in late joiners starts new windows, and a
  // window checked restorable on the plan before would say nothing of the one the kill meets
  REQUIRE(eventually([&] { return m.eval_json("return job.training().ranks").size() == 6; }, 30000, 20));
  auto policy_in_force = [&](const std::string& label) {
    return eventually([&] {
      auto c = m.eval_json("return job.checkpoint()");
      return c.contains("policy") && c["policy"] == label && c.contains("restorable") &&
             c["restorable"]["from"].get<int64_t>() >= m.eval_json("return job.training().plan_from_step").get<int64_t>();
    }, 30000, 20);
  };
  REQUIRE(policy_in_force("moetion gen 1"));
  for (const char* next : {"dense", "moetion"}) {
    auto loaded = m.eval(std::string("policy.load('checkpoint', '") + next + "')");
    REQUIRE_MESSAGE(loaded.ok, loaded.error);
  }
  REQUIRE_MESSAGE(policy_in_force("moetion gen 3"), m.eval_json("return job.checkpoint()").dump());
  // every holder of an expert, killed by a drill started from the REPL
  int64_t at = m.status()["step"];
  std::string path = m.dir + "/lose.lua";
  std::ofstream(path) << "drill{ name = 'lose-after-swaps', seed = 1 }\nkill{ expert = 3, layer = 0, step = " << at + 3
                      << " }\n";
  REQUIRE(m.eval_json("return drill.start('" + path + "')") == true);
  auto restored = [&] {
    for (const auto& e : m.eval_json("return job.events(200)"))
      if (e["kind"] == "restored") return e["detail"].get<std::string>();
    return std::string();
  };
  REQUIRE_MESSAGE(eventually([&] { return !restored().empty(); }, 30000, 20), m.eval_json("return job.events(40)").dump());
  const std::string detail = restored();
  CHECK_MESSAGE(detail.find("sparse window") != std::string::npos, detail);
  bool failed = false;
  for (const auto& e : m.eval_json("return job.events(200)")) failed = failed || e["kind"] == "sparse_restore_failed";
  CHECK_FALSE(failed);
  // and training goes on past the replay, every operator active again
  int64_t after = m.status()["step"];
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > after + 20; }, 30000, 20));
  CHECK(m.status()["workers"]["ready"] == 3);
}

TEST_CASE("t0554-slice-budget: agents that cannot hold their share refuse it with the rule, and training goes on") {
  std::string dir = temp_dir("sparse-restore");
  MeshOptions shape;
  std::string job = dir + "/job.lua";
  // slots of about 1 MiB and more (d 64, every operator in full every 10 steps) against 1 MiB an agent
  std::ofstream(job) << "return {\n  name = 'slice-budget',\n"
                     << "  model = { layers = 2, d_model = 64, heads = 4, experts = 8, top_k = 2, seq_len = 32 },\n  "
                     << shape.data << "\n  train = { steps = 25, batch = 8, rebalance_every = 0, checkpoint_every = 0, "
                     << "peer_memory_mb = 1 },\n  mesh = { nodes = 3 },\n  policies = { slots = 4, checkpoint = 'dense' },\n}\n";
  auto j = run_json({bin(), "run", job, "--json", "--out", dir + "/run"}, dir + "/run.out", 60000);
  CHECK(j["steps"] == 25);
  CHECK(j["lost_steps"] == 0);
  std::string refusal;
  int said = 0;
  for (const auto& e : events(dir + "/run"))
    if (e.kind == "slice_refused") {
      if (refusal.empty()) refusal = e.detail;
      ++said;
    }
  CAPTURE(refusal);
  CHECK(refusal.find("refused: ") != std::string::npos);
  CHECK(refusal.find("past its budget of 1048576 (the windows held are kept) (1 refused so far)") != std::string::npos);
  CHECK(said <= 3 * 2);  // the first refusal of each node, then at the 10th (not every one)
}

// bench_recovery.cpp — time from a node failure to resumed training, on a real loopback mesh of CPU
// workers, split into the recovery's parts.
//
// Each mesh starts `nodes` agents (one CPU worker each, 100 ms heartbeats) training a small
// moe-gpt with lazarus + mro (every expert on at least 2 nodes, so a single loss never needs a
// checkpoint) and no periodic rebalancing. Once training runs, the bench SIGKILLs one agent, waits
// until the controller reports training resumed (a `recovered` event), lets a few steps commit,
// and kills the next, down to half the nodes (Lazarus §6.2's pattern). Times come from the
// controller's events (CLOCK_MONOTONIC, shared with this process):
//   detection  kill -> node_dead
//   planning   node_dead -> the last `plan` decided before training resumed (the in-flight step's
//              abort, at most a 50 ms pause until the lost rank is seen, allocation + placement)
//   connect    the slowest worker's rendezvous and Gloo context for the new plan
//   migrate    the slowest worker's unit transfers
//   switch     plan -> plan_applied (connect and migrate included, and the messages between)
//   resume     plan_applied -> the first step committed under the new plan
//   total      kill -> that commit
// Prints p50 / p99 / max of each over all trials.
//
// --cpu-share F puts each worker in a CPU cgroup of F CPUs (mesh/cpu_share.h; 0.22 with 8 workers
// on 2 cores): every worker then runs at the same slow speed, as on a cluster of small dedicated
// cores, instead of the survivors speeding up as workers die.
//
// --devices SPEC gives every agent that worker device instead of cpu:1: `--devices cuda:0` puts all
// the workers on GPU 0 (they share it over Gloo with host staging, docs/gpu.md), for the recovery
// of GPU workers split the same way.
//
// --explain MS prints the controller's events of every trial slower than MS in total (each with its
// time after the kill), to see where a tail comes from.
//
// usage: bench_recovery [meshes = 3] [nodes = 8] [--cpu-share F] [--devices SPEC] [--explain MS]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>

#include "mesh/cpu_share.h"
#include "support/bench_table.h"
#include "support/mesh_harness.h"

using namespace sal::test;

namespace {

struct BenchOptions {
  int nodes = 8;
  double cpu_share = 0;
  std::string devices = "cpu:1";
  double explain_ms = 0;  // 0: no trial is explained
};

struct Trial {
  double detection = 0, planning = 0, connect = 0, migrate = 0, sw = 0, resume = 0, total = 0;
};

MeshOptions options(int nodes, double cpu_share, const std::string& devices) {
  MeshOptions o;
  o.agents = nodes;
  o.cpu_share = cpu_share;
  o.devices = devices;
  o.steps = 1'000'000'000;
  o.model = "model = { layers = 2, d_model = 64, heads = 4, experts = 8, top_k = 2, seq_len = 32 },";
  o.train = "batch = 16, rebalance_every = 0";
  o.extra = "policies = { allocation = 'lazarus', placement = 'mro', min_replicas = 2, slots = 4 },";
  return o;
}

int64_t step_of(TestMesh& m) { return m.status()["step"].get<int64_t>(); }

// The events after `after_seq`, once a `recovered` one is among them (or throws after 30 s).
nlohmann::json events_until_recovered(TestMesh& m, int64_t after_seq) {
  nlohmann::json out;
  bool done = eventually([&] {
    out = nlohmann::json::array();
    bool recovered = false;
    for (auto& e : m.eval_json("return job.events(500)"))
      if (e["seq"].get<int64_t>() > after_seq) {
        out.push_back(e);
        recovered = recovered || e["kind"] == "recovered";
      }
    return recovered;
  }, 30000, 10);
  if (!done) throw std::runtime_error("training did not resume within 30 s");
  return out;
}

double ms_of(const nlohmann::json& e) { return e["mono_ns"].get<double>() / 1e6; }

// "... (slowest worker: connect 12 ms, migrate 3 ms)"
std::pair<double, double> connect_migrate(const std::string& detail) {
  static const std::regex re("connect ([0-9]+) ms, migrate ([0-9]+) ms");
  std::smatch m;
  if (!std::regex_search(detail, m, re)) return {-1, -1};
  return {std::stod(m[1]), std::stod(m[2])};
}

Trial measure(const nlohmann::json& events, double kill_ms) {
  Trial t;
  const nlohmann::json *dead = nullptr, *plan = nullptr, *applied = nullptr, *recovered = nullptr;
  for (const auto& e : events) {
    const std::string kind = e["kind"];
    if (kind == "node_dead" && !dead) dead = &e;
    if (kind == "plan") plan = &e;
    if (kind == "plan_applied") applied = &e;
    if (kind == "recovered") {
      recovered = &e;
      break;
    }
  }
  if (!dead || !plan || !applied || !recovered) throw std::runtime_error("a recovery without its events");
  t.detection = ms_of(*dead) - kill_ms;
  t.planning = ms_of(*plan) - ms_of(*dead);
  std::tie(t.connect, t.migrate) = connect_migrate((*applied)["detail"]);
  t.sw = ms_of(*applied) - ms_of(*plan);
  t.resume = ms_of(*recovered) - ms_of(*applied);
  t.total = ms_of(*recovered) - kill_ms;
  return t;
}

int64_t last_seq(TestMesh& m) {
  int64_t s = 0;
  for (auto& e : m.eval_json("return job.events(1)")) s = e["seq"];
  return s;
}

// The events of a slow trial, one a line, timed from the kill.
void explain(const nlohmann::json& events, double kill_ms) {
  for (const auto& e : events) {
    std::string detail = e.value("detail", "");
    if (detail.size() > 160) detail = detail.substr(0, 160) + "...";
    std::fprintf(stderr, "    +%7.1f ms  %-16s %s\n", ms_of(e) - kill_ms, e["kind"].get<std::string>().c_str(), detail.c_str());
  }
}

void run_mesh(const BenchOptions& b, std::vector<Trial>& trials) {
  const int nodes = b.nodes;
  TestMesh m(options(nodes, b.cpu_share, b.devices));
  m.start();
  // training runs with every node in the plan (the first plan may start before the last workers are ready)
  auto all_in = [&] { return m.eval_json("return #job.training().ranks").get<int>() == nodes; };
  if (!eventually([&] { return step_of(m) > 10 && all_in(); }, 60000))
    throw std::runtime_error("training did not start on every node");
  for (int k = 0; k < nodes / 2; ++k) {
    int64_t from = step_of(m);
    eventually([&] { return step_of(m) >= from + 5; }, 20000);
    int64_t seq = last_seq(m);
    double kill_ms = now_ms();
    m.agents[size_t(k)].signal(SIGKILL);
    auto events = events_until_recovered(m, seq);
    trials.push_back(measure(events, kill_ms));
    const Trial& t = trials.back();
    std::fprintf(stderr, "%d -> %d nodes: total %.0f ms (detect %.1f, plan %.1f, switch %.1f, resume %.1f)\n",
                 nodes - k, nodes - k - 1, t.total, t.detection, t.planning, t.sw, t.resume);
    if (b.explain_ms > 0 && t.total > b.explain_ms) explain(events, kill_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  BenchOptions b;
  double& cpu_share = b.cpu_share;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cpu-share" && i + 1 < argc)
      cpu_share = std::atof(argv[++i]);
    else if (std::string(argv[i]) == "--devices" && i + 1 < argc)
      b.devices = argv[++i];
    else if (std::string(argv[i]) == "--explain" && i + 1 < argc)
      b.explain_ms = std::atof(argv[++i]);
    else if (argv[i][0] == '-')
      positional.assign(1, "0");  // an unknown option, or one without its value: the usage below
    else
      positional.push_back(argv[i]);
  }
  int meshes = positional.size() > 0 ? std::atoi(positional[0].c_str()) : 3;
  b.nodes = positional.size() > 1 ? std::atoi(positional[1].c_str()) : 8;
  const int nodes = b.nodes;
  if (meshes < 1 || nodes < 2 || cpu_share < 0) {
    std::fprintf(stderr, "usage: bench_recovery [meshes >= 1] [nodes >= 2] [--cpu-share F] [--devices SPEC] [--explain MS]\n");
    return 2;
  }
  std::string confined = "workers unconfined";
  if (cpu_share > 0) {
    auto probe = sal::mesh::CpuShares::open(cpu_share);
    confined = probe ? "each worker in a CPU cgroup of " + std::to_string(cpu_share) + " CPU"
                     : "fair measurement unavailable (" + probe.error().message() + "): workers unconfined";
    if (!probe) cpu_share = 0;
  }
  std::vector<Trial> trials;
  auto prune = [&] {  // the groups of the agents each mesh killed (the next agent would remove them too)
    if (cpu_share <= 0) return;
    if (auto shares = sal::mesh::CpuShares::open(cpu_share)) {
      shares->prune_dead();
      shares->remove_if_empty();
    }
  };
  try {
    for (int i = 0; i < meshes; ++i) run_mesh(b, trials);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_recovery: %s\n", e.what());
    prune();
    return 1;
  }
  prune();
  std::printf("recovery from a SIGKILLed node: %d meshes of %d workers on %s, one node killed at a time down to %d,"
              " %zu trials; %s\n\n", meshes, nodes, b.devices.c_str(), nodes - nodes / 2, trials.size(), confined.c_str());
  const Parts<Trial> parts = {
      {"detection (kill -> node_dead)", &Trial::detection},
      {"planning (node_dead -> plan)", &Trial::planning},
      {"collective rebuild (slowest worker)", &Trial::connect},
      {"migration (slowest worker)", &Trial::migrate},
      {"plan switch (plan -> plan_applied)", &Trial::sw},
      {"first step (plan_applied -> committed)", &Trial::resume},
      {"total (kill -> training resumed)", &Trial::total}};
  print_parts(trials, parts, true);
  return 0;
}

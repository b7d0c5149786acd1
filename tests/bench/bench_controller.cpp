// bench_controller.cpp — time from a SIGKILLed controller to resumed training, on a real loopback
// mesh of CPU workers, split into the restart's parts.
//
// One mesh of `nodes` agents (one CPU worker each, 100 ms heartbeats) trains a small moe-gpt. Every
// few steps the bench SIGKILLs the controller and starts `salamander controller --resume RUN_DIR`
// at once (as a supervisor would), then waits until the new controller reports training resumed
// (a `recovered` event). Times come from this process's clock and the new controller's events
// (CLOCK_MONOTONIC, shared):
//   start      kill -> the new controller serves its REPL (process start, journal read, policies
//              loaded, endpoints bound)
//   replay     reading and folding the journal (its own figure, in the controller_resumed event)
//   reconnect  controller_resumed -> every rank of the plan back (`resumed`: agents registered
//              again under their ids and reported what their workers hold)
//   reconcile  resumed -> the first step committed (the in-flight step discarded, the plan put in
//              force again on a new data plane, one step)
//   after up   controller_resumed -> that commit (the target: under 2 s)
//   total      kill -> that commit
// Prints p50 and max of each.
//
// usage: bench_controller [restarts = 10] [nodes = 4]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <regex>

#include "support/bench_table.h"
#include "support/mesh_harness.h"

using namespace sal::test;

namespace {

struct Trial {
  double start = 0, replay = 0, reconnect = 0, reconcile = 0, after_up = 0, total = 0;
};

MeshOptions options(int nodes) {
  MeshOptions o;
  o.agents = nodes;
  o.steps = 1'000'000'000;
  o.log_level = "info";
  o.model = "model = { layers = 2, d_model = 64, heads = 4, experts = 8, top_k = 2, seq_len = 32 },";
  o.train = "batch = 16, rebalance_every = 0";
  o.extra = "policies = { allocation = 'lazarus', placement = 'mro', min_replicas = 2, slots = 4 },";
  return o;
}

int64_t step_of(TestMesh& m) { return m.status()["step"].get<int64_t>(); }

double ms_of(const nlohmann::json& e) { return e["mono_ns"].get<double>() / 1e6; }

// The new controller's events up to its first `recovered` (or throws after 30 s).
nlohmann::json events_until_recovered(TestMesh& m) {
  nlohmann::json out;
  bool done = eventually([&] {
    out = m.eval_json("return job.events(500)");
    for (const auto& e : out)
      if (e["kind"] == "recovered") return true;
    return false;
  }, 30000, 10);
  if (!done) throw std::runtime_error("training did not resume within 30 s of the restart");
  return out;
}

// "... (123 records read in 0.4 ms): ..."
double replay_ms(const std::string& detail) {
  static const std::regex re("read in ([0-9.]+) ms");
  std::smatch m;
  return std::regex_search(detail, m, re) ? std::stod(m[1]) : -1;
}

Trial measure(const nlohmann::json& events, double kill_ms, double up_ms) {
  const nlohmann::json *resumed_ctl = nullptr, *resumed = nullptr, *recovered = nullptr;
  for (const auto& e : events) {
    const std::string kind = e["kind"];
    if (kind == "controller_resumed" && !resumed_ctl) resumed_ctl = &e;
    if (kind == "resumed" && !resumed) resumed = &e;
    if (kind == "recovered" && !recovered) recovered = &e;
  }
  if (!resumed_ctl || !resumed || !recovered) throw std::runtime_error("a restart without its events");
  Trial t;
  t.start = up_ms - kill_ms;
  t.replay = replay_ms((*resumed_ctl)["detail"]);
  t.reconnect = ms_of(*resumed) - ms_of(*resumed_ctl);
  t.reconcile = ms_of(*recovered) - ms_of(*resumed);
  t.after_up = ms_of(*recovered) - ms_of(*resumed_ctl);
  t.total = ms_of(*recovered) - kill_ms;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int restarts = argc > 1 ? std::atoi(argv[1]) : 10;
  int nodes = argc > 2 ? std::atoi(argv[2]) : 4;
  if (restarts < 1 || nodes < 2) {
    std::fprintf(stderr, "usage: bench_controller [restarts >= 1] [nodes >= 2]\n");
    return 2;
  }
  std::vector<Trial> trials;
  try {
    TestMesh m(options(nodes));
    m.start();
    auto all_in = [&] { return m.eval_json("return #job.training().ranks").get<int>() == nodes; };
    if (!eventually([&] { return step_of(m) > 10 && all_in(); }, 60000))
      throw std::runtime_error("training did not start on every node");
    for (int k = 0; k < restarts; ++k) {
      int64_t from = step_of(m);
      eventually([&] { return step_of(m) >= from + 10; }, 20000);
      double kill_ms = now_ms();
      m.controller.signal(SIGKILL);
      m.controller.wait(5000);
      m.resume_controller();  // returns once the new controller's REPL answers
      double up_ms = now_ms();
      trials.push_back(measure(events_until_recovered(m), kill_ms, up_ms));
      const Trial& t = trials.back();
      std::fprintf(stderr, "restart %d: total %.0f ms (start %.0f, replay %.1f, reconnect %.0f, reconcile %.0f)\n",
                   k + 1, t.total, t.start, t.replay, t.reconnect, t.reconcile);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_controller: %s\n", e.what());
    return 1;
  }
  std::printf("controller SIGKILL -> `controller --resume` -> training resumed: %d CPU workers, %zu restarts, "
              "workers unconfined\n\n", nodes, trials.size());
  const Parts<Trial> parts = {
      {"start (kill -> new controller serving)", &Trial::start},
      {"journal replay (read and fold)", &Trial::replay},
      {"reconnect (every rank back)", &Trial::reconnect},
      {"reconcile (-> first step committed)", &Trial::reconcile},
      {"after up (controller_resumed -> committed)", &Trial::after_up},
      {"total (kill -> training resumed)", &Trial::total}};
  print_parts(trials, parts, false);
  return 0;
}

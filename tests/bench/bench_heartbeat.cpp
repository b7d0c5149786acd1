// bench_heartbeat.cpp — failure detection latency on a real loopback mesh.
//
// A controller and 6 agents (100 ms heartbeats, dead after 3 missed). Each trial takes one live
// agent and either SIGKILLs it (process exit: the kernel closes its connection), SIGSTOPs it (a
// frozen node: only silence shows), or SIGKILLs one of its worker processes; the latency is the
// controller's event timestamp (CLOCK_MONOTONIC, shared by all processes) minus the moment of the
// signal. The agent is then replaced. Prints p50/p99/max per mode.
//
// usage: bench_heartbeat [trials per mode = 20]
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "support/mesh_harness.h"

using namespace sal::test;

namespace {

// Timestamp (ms) of the first event of `kind` for `node`, polling until it shows up.
double event_time(TestMesh& m, const std::string& kind, int64_t node) {
  double t = -1;
  eventually([&] {
    for (auto& e : m.eval_json("return job.events(200)"))
      if (e["kind"] == kind && e.value("node", -1) == node) {
        t = e["mono_ns"].get<double>() / 1e6;
        return true;
      }
    return false;
  }, 5000, 5);
  return t;
}

struct Live {
  size_t agent;
  int64_t node;
  pid_t worker;
};

Live pick(TestMesh& m) {
  for (auto& n : m.eval_json("return job.nodes()")) {
    if (n["state"] != "alive" || n["workers"].empty() || n["workers"][0]["state"] != "ready") continue;
    for (size_t i = 0; i < m.agents.size(); ++i)
      if (m.agents[i].pid() == n["pid"].get<pid_t>()) return {i, n["id"], n["workers"][0]["pid"].get<pid_t>()};
  }
  throw std::runtime_error("no live agent");
}

void replace(TestMesh& m, size_t i, int want_ready) {
  m.agents[i].kill_group();
  m.agents[i] = spawn({bin(), "agent", "--controller", m.mesh_ep, "--devices", "cpu:1"},
                      m.dir + "/agent-r" + std::to_string(i) + ".out");
  eventually([&] { return m.status()["workers"]["ready"] == want_ready; }, 10000, 10);
}

struct Stats {
  std::vector<double> v;
  double pct(double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
  }
};

}  // namespace

int main(int argc, char** argv) {
  int trials = argc > 1 ? std::atoi(argv[1]) : 20;
  const int kAgents = 6;
  TestMesh m({.agents = kAgents});
  m.start();
  Stats kill_s, stop_s, worker_s;
  for (int t = 0; t < trials; ++t) {
    Live a = pick(m);
    double t0 = now_ms();
    m.agents[a.agent].signal(SIGKILL);
    kill_s.v.push_back(event_time(m, "node_dead", a.node) - t0);
    replace(m, a.agent, kAgents);

    a = pick(m);
    t0 = now_ms();
    m.agents[a.agent].signal(SIGSTOP);
    stop_s.v.push_back(event_time(m, "node_dead", a.node) - t0);
    m.agents[a.agent].signal(SIGCONT);
    replace(m, a.agent, kAgents);

    a = pick(m);
    t0 = now_ms();
    ::kill(a.worker, SIGKILL);
    worker_s.v.push_back(event_time(m, "worker_exited", a.node) - t0);
    replace(m, a.agent, kAgents);
    std::fprintf(stderr, "\rtrial %d/%d", t + 1, trials);
  }
  std::fprintf(stderr, "\n");
  std::printf("failure detection, loopback, %d agents, heartbeat 100 ms, dead after 3 missed, %d trials each\n\n",
              kAgents, trials);
  std::printf("| failure                      | p50 (ms) | p99 (ms) | max (ms) | target |\n");
  std::printf("| ---------------------------- | -------: | -------: | -------: | ------ |\n");
  auto row = [](const char* what, Stats& s, const char* target) {
    std::printf("| %-28s | %8.1f | %8.1f | %8.1f | %s |\n", what, s.pct(0.5), s.pct(0.99), s.pct(1.0), target);
  };
  row("agent SIGKILL (process exit)", kill_s, "immediate");
  row("agent SIGSTOP (frozen node)", stop_s, "<= 300 ms");
  row("worker SIGKILL", worker_s, "immediate");
  return 0;
}

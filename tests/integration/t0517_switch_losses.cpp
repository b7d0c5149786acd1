// t0517_switch_losses.cpp — nodes killed during three successive plan switches (issue 33): every
// worker leaves each abandoned plan within 100 ms of the controller abandoning it (by the logs'
// clocks), and training goes on with the nodes left. Real processes and real SIGKILLs. It runs in
// the serial test program (test_no_stall): its bound is a latency, which another test program on
// the same two cores stretches (seen: 118 ms under `ctest -j2`, 32-77 ms alone).
#include <doctest/doctest.h>

#include <signal.h>
#include <time.h>

#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// Milliseconds into the local day of a log line's "HH:MM:SS.mmm" (-1: no time), and of a wall clock.
int64_t log_ms(const std::string& line) {
  int h, m, sec, ms;
  if (std::sscanf(line.c_str(), "%2d:%2d:%2d.%3d", &h, &m, &sec, &ms) != 4) return -1;
  return ((int64_t(h) * 60 + m) * 60 + sec) * 1000 + ms;
}
int64_t day_ms(int64_t wall_ms) {
  time_t t = time_t(wall_ms / 1000);
  struct tm local;
  localtime_r(&t, &local);
  return ((int64_t(local.tm_hour) * 60 + local.tm_min) * 60 + local.tm_sec) * 1000 + wall_ms % 1000;
}

// When a worker (its agent's log) was done with plan `n` that the controller abandoned at
// `abandoned` (ms into the day): the line where it failed or skipped it; for a worker that had
// applied it before, the line where it heard of the abandonment. -1 when the log never names it
// (not a rank, or killed).
int64_t left_plan_ms(const std::string& log, uint64_t n, int64_t abandoned) {
  const std::string plan = "plan " + std::to_string(n) + " ";
  int64_t heard = -1, left = -1, applied = -1;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find(plan);
    if (at == std::string::npos || line.find("[worker") == std::string::npos) continue;
    std::string rest = line.substr(at + plan.size());
    if (rest.rfind("abandoned by the controller", 0) == 0) heard = log_ms(line);
    if (rest.rfind("failed", 0) == 0 || rest.rfind("skipped", 0) == 0) left = log_ms(line);
    if (rest.rfind("applied in", 0) == 0) applied = log_ms(line);
  }
  if (left >= 0) return left;
  if (applied >= 0 && applied <= abandoned) return heard >= 0 ? heard : applied;
  return -1;
}

}  // namespace

TEST_CASE("t0517-losses-during-switches: nodes killed in three successive plan switches, and every worker leaves each abandoned plan within 100 ms") {
  MeshOptions o;
  o.agents = 9;
  o.steps = 1'000'000'000;
  o.model = "model = { layers = 2, d_model = 32, heads = 2, experts = 8, top_k = 2, seq_len = 16 },";
  o.train = "batch = 8, rebalance_every = 0";
  o.extra = "policies = { placement = 'mro', slots = 4, min_replicas = 2 },";
  o.agent_log_level = "debug";
  o.heartbeat_ms = 1000;  // the frozen nodes below stay live (3 s) until they are killed
  TestMesh m(o);
  m.start();
  auto step = [&] { return m.status()["step"].get<int64_t>(); };
  REQUIRE(eventually([&] { return step() > 5 && m.eval_json("return #job.training().ranks").get<int>() == o.agents; }, 60000));
  // A first loss starts a switch; each new plan decided while the streak lasts loses one more node
  // of it, the kill sent as soon as the plan is seen. The three nodes to lose in the switches are
  // frozen (SIGSTOP) first: a plan that counts on a frozen node cannot be applied before the test
  // sees it and kills the node, however loaded the machine (a kill that came after the plan was
  // applied would be a loss while running, and the streak over).
  int64_t seq = 0;
  for (auto& e : m.eval_json("return job.events(1)")) seq = e["seq"];
  size_t next = o.agents;
  for (size_t a = next - 4; a < next - 1; ++a) m.agents[a].signal(SIGSTOP);
  auto kill_one = [&] { m.agents[--next].signal(SIGKILL); };
  kill_one();
  int streak = 0, best = 0;
  std::set<uint64_t> abandoned;
  bool resumed = false;
  const int64_t until = now_ms() + 30000;
  static const std::regex plan_re("^plan (\\d+) "), failed_re("^plan (\\d+) not applied: worker .* left");
  while (now_ms() < until && !(best >= 3 && resumed)) {
    for (auto& e : m.eval_json("return job.events(50)")) {
      if (e["seq"].get<int64_t>() <= seq) continue;
      seq = e["seq"];
      const std::string kind = e["kind"], detail = e["detail"];
      std::smatch g;
      if (kind == "plan" && std::regex_search(detail, g, plan_re) && best < 3 && next > size_t(o.agents - 4))
        kill_one();
      if (kind == "plan_failed" && std::regex_search(detail, g, failed_re)) {
        abandoned.insert(std::stoull(g[1]));
        best = std::max(best, ++streak);
      }
      if (kind == "plan_applied") streak = 0;
      if (kind == "recovered" && best >= 3) resumed = true;
    }
  }
  INFO("plans abandoned: " << abandoned.size() << ", longest streak " << best);
  REQUIRE(best >= 3);
  REQUIRE(resumed);
  // training goes on with the nodes left
  int64_t from = step();
  CHECK(eventually([&] { return step() >= from + 5; }, 20000));
  // every worker that had each abandoned plan left it within 100 ms of the controller abandoning it
  std::map<uint64_t, int64_t> failed_at;
  for (const auto& e : events(m.dir)) {
    std::smatch g;
    if (e.kind == "plan_failed" && std::regex_search(e.detail, g, failed_re)) failed_at[std::stoull(g[1])] = day_ms(e.wall_ms);
  }
  size_t checked = 0;
  int64_t worst = 0;
  for (const auto& [plan, at] : failed_at)
    for (int a = 0; a < o.agents; ++a) {
      int64_t left = left_plan_ms(file_text(m.dir + "/node" + std::to_string(a) + ".out"), plan, at);
      if (left < 0) continue;
      ++checked;
      worst = std::max(worst, left - at);
      CHECK_MESSAGE(left - at <= 100, "node" << a << " left plan " << plan << " " << left - at << " ms after it was abandoned");
    }
  CHECK(checked >= 3 * 4);  // each of the three plans had several surviving ranks
  MESSAGE(failed_at.size() << " plans abandoned (longest streak " << best << "), " << checked
                           << " workers' leaving timed, the slowest " << worst << " ms after the abandonment");
}

// t1000_gray.cpp — gray failures on a real mesh of workers confined to CPU shares: a drill's
// slow{} cuts one node's share to 40 % for a while; the speed watch names that node's worker slow
// within 20 committed steps of the cut and gives it back after the share's return, and the
// default health policy gives that worker less of the steps' work meanwhile.
// (Under CPU quotas on a 2-core machine the worker with the most work — a rank that also copies
// snapshots — is at times named too: docs/health.md says why; no assertion on other workers yet.)
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// 0.3-CPU workers (4 of them leave room on a 2-core machine for the controller, the agents and the
// rest), each computing about 15 ms of CPU a step: several quota periods (3 ms of CPU each, 1.2 ms
// once cut), so a cut worker is slower in every step. With a quarter of this batch a worker's work
// (2-3 ms) often fit in what was left of a period, and its ratio went from 1 to 10 and back from
// step to step: named 34-43 steps after the cut in 3 runs of 6 (7-8 in 8 of 8 with this batch).
std::string write_job(const std::string& dir) {
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'gray',\n"
                      << "  model = { layers = 1, d_model = 64, heads = 2, experts = 8, top_k = 2, seq_len = 64 },\n"
                      << "  data = { path = '" << docs_dir() << "' },\n"
                      << "  train = { batch = 64, lr = 1e-2, warmup = 5, rebalance_every = 0 },\n"
                      << "  mesh = { nodes = 4 },\n  policies = { slots = 4 },\n}\n";
  return path;
}

// The step an event's detail says ("... at step 27)"); -1 when it names none.
int64_t step_of(const std::string& detail) {
  std::smatch m;
  static const std::regex at("at step (\\d+)\\)");
  return std::regex_search(detail, m, at) ? std::stoll(m[1]) : -1;
}

struct Seen {
  int64_t slowed_step = -1, restored_step = -1;  // the steps committed when the share was cut, and back
  std::vector<report::EventRow> slow, back, shares;
};

Seen read_events(const std::string& run) {
  Seen s;
  for (const auto& e : events(run)) {
    if (e.kind == "node_slowed") s.slowed_step = step_of(e.detail);
    if (e.kind == "node_speed_restored") s.restored_step = step_of(e.detail);
    if (e.kind == "node_slow") s.slow.push_back(e);
    if (e.kind == "node_speed_back") s.back.push_back(e);
    if (e.kind == "work_shares") s.shares.push_back(e);
  }
  return s;
}

}  // namespace

TEST_CASE("t1000-slow-node: a node cut to 40 % of its CPU share is named within 20 steps, and given back after its recovery") {
  std::string dir = temp_dir("gray");
  std::string job = write_job(dir);
  const std::string drill = std::string(SAL_SOURCE_DIR) + "/tests/drills/slow_node.lua";
  auto j = run_json({bin(), "run", job, "--drill", drill, "--drill-arg", "steps=220", "--drill-arg", "for_s=12",
                     "--cpu-share", "0.3", "--json", "--out", dir + "/run"},
                    dir + "/run.out", 120000);
  // (The cut lasts 12 s: a verdict needs the speed watch's window of 20 steps, and 5 s were 55
  // steps on the machine of 2026-12-02 but 12 on one of 2026-12-03, whose steps took 140 ms, cut
  // 330-630, where it was never named; 12 s were 42 there, named 18 steps in. 220 steps: on the
  // faster machine the cut ends near step 150, and "back" can take a window after it.)
  CHECK(j["steps"] == 220);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  Seen s = read_events(dir + "/run");
  REQUIRE(s.slowed_step >= 20);
  // node 2's verdicts: the first after the cut, and the first "back" after its share returned
  auto first_of = [&](const std::vector<report::EventRow>& rows, int64_t after) -> int64_t {
    for (const auto& e : rows)
      if (e.node.rfind("2", 0) == 0 && step_of(e.detail) > after) return step_of(e.detail);
    return -1;
  };
  const int64_t named = first_of(s.slow, s.slowed_step);
  INFO(file_text(dir + "/run/events.csv"));
  REQUIRE(named > 0);
  CHECK(named <= s.slowed_step + 20);
  REQUIRE(s.restored_step > named);
  // given back before the run ends (a worker given less work can be seen at speed while still cut —
  // docs/health.md — and named again later, so its last verdict is the one that counts)
  int64_t last_slow = -1, last_back = -1;
  for (const auto& e : s.slow)
    if (e.node.rfind("2", 0) == 0) last_slow = step_of(e.detail);
  for (const auto& e : s.back)
    if (e.node.rfind("2", 0) == 0) last_back = step_of(e.detail);
  CHECK(last_back > last_slow);  // it ends the run not slow
  // the default health policy (lighten) gave node 2's worker less work after it was named
  REQUIRE_FALSE(s.shares.empty());
  CHECK(s.shares[0].detail.find("lighten") != std::string::npos);
  CHECK(std::any_of(s.shares.begin(), s.shares.end(), [](const report::EventRow& e) {
    return e.detail.find("(shares: 2.0 0.") != std::string::npos;
  }));
}

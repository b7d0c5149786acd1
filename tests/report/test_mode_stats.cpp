// test_mode_stats.cpp — the recovery modes compared as an experiment (report/mode_stats.h): the
// node-seconds a run had from its joins and losses, efficiency, medians and ranges, and each mode
// against the baseline pair by pair — on samples, or on samples per second when every run trained
// the same samples (a drill that stops at a step count).
#include <doctest/doctest.h>

#include "report/mode_stats.h"

using namespace sal::report;

namespace {

EventRow node_event(double t, const std::string& kind, const std::string& node, bool stopping = false) {
  EventRow e;
  e.time_s = t, e.kind = kind, e.node = node, e.stopping = stopping;
  return e;
}

Run mode_run(const std::string& mode, double samples, double elapsed, std::vector<EventRow> events) {
  Run r;
  r.dir = "/runs/" + mode;
  r.summary = {{"mode", mode}, {"samples", samples}, {"elapsed_s", elapsed}, {"recovery_max_s", 0.5}};
  r.events = std::move(events);
  return r;
}

}  // namespace

TEST_CASE("node-seconds count each node from its join to its loss, and the job's own end is no loss") {
  Run r = mode_run("elastic", 100, 10,
              {node_event(0, "node_joined", "1"), node_event(0, "node_joined", "2"), node_event(4, "node_dead", "2"),
               node_event(6, "node_joined", "3"), node_event(9.5, "node_left", "1", true)});
  // node 1: 0..10 (its leaving is the stop), node 2: 0..4, node 3: 6..10
  CHECK(node_seconds(r) == doctest::Approx(10 + 4 + 4));
  CHECK(*efficiency(r) == doctest::Approx(100.0 / 18));
  Run none = mode_run("elastic", 100, 10, {});
  CHECK_FALSE(efficiency(none));
}

TEST_CASE("spread: the median of an even count is the mean of the middle two, with the range") {
  auto s = spread({5, 1, 3, 9});
  CHECK(s.n == 4);
  CHECK(s.median == 4);
  CHECK(s.min == 1);
  CHECK(s.max == 9);
  CHECK(spread({}).n == 0);
}

TEST_CASE("mode stats: per mode in order of first run, each against checkpoint-restart run by run") {
  auto joined = [](double end) {
    return std::vector<EventRow>{node_event(0, "node_joined", "1"), node_event(0, "node_joined", "2"),
                                 node_event(end, "node_left", "1", true)};
  };
  std::vector<Run> runs = {mode_run("elastic", 300, 10, joined(10)), mode_run("checkpoint-restart", 100, 10, joined(10)),
                           mode_run("elastic", 200, 10, joined(10)), mode_run("checkpoint-restart", 200, 10, joined(10)),
                           mode_run("elastic", 260, 10, joined(10)), mode_run("checkpoint-restart", 130, 10, joined(10))};
  auto stats = mode_stats(runs);
  REQUIRE(stats.size() == 2);
  CHECK(baseline_mode(stats) == "checkpoint-restart");
  CHECK(stats[0].mode == "elastic");
  CHECK(stats[0].runs == 3);
  CHECK(stats[0].samples.median == 260);
  CHECK(stats[0].efficiency.median == doctest::Approx(260.0 / 20));
  // pairs: 300/100, 200/200, 260/130 -> 3, 1, 2: median 2 (not 260 / 130 of the medians by chance)
  CHECK(stats[0].vs_baseline.median == doctest::Approx(2.0));
  CHECK(stats[0].vs_baseline.min == doctest::Approx(1.0));
  CHECK(stats[1].vs_baseline.median == doctest::Approx(1.0));
  auto j = mode_stats_json(stats);
  CHECK(j["baseline"] == "checkpoint-restart");
  CHECK(j["modes"][0]["samples_per_node_s"]["median"].get<double>() == doctest::Approx(13.0));
  std::string text = mode_stats_text(stats);
  CHECK(text.find("elastic") != std::string::npos);
  CHECK(text.find("2.00x [1.00-3.00]") != std::string::npos);
}

TEST_CASE("mode stats: runs that all trained the same samples are compared on samples per second") {
  auto joined = [](double end) {
    return std::vector<EventRow>{node_event(0, "node_joined", "1"), node_event(end, "node_left", "1", true)};
  };
  std::vector<Run> runs = {mode_run("elastic", 100, 10, joined(10)), mode_run("checkpoint-restart", 100, 20, joined(20)),
                           mode_run("elastic", 100, 12, joined(12)), mode_run("checkpoint-restart", 100, 18, joined(18))};
  auto stats = mode_stats(runs);
  REQUIRE(stats.size() == 2);
  // pairs: (100/10)/(100/20) = 2, (100/12)/(100/18) = 1.5: median 1.75, not 1.00
  CHECK(stats[0].vs_baseline.median == doctest::Approx(1.75));
  CHECK(stats[1].vs_baseline.median == doctest::Approx(1.0));
  auto j = mode_stats_json(stats);
  CHECK(j["compared_on"] == "samples/s");
  CHECK(j["modes"][0]["vs_baseline"]["median"].get<double>() == doctest::Approx(1.75));
  CHECK(mode_stats_text(stats).find("samples/s vs checkpoint-restart") != std::string::npos);
}

// test_step_log.cpp — the training metrics the controller keeps: the load window's means and recent steps, the
// expert-work imbalance of a plan under given loads, the run totals behind the summary, and
// metrics.csv continued by a resumed controller; events.csv replaced by a new run in the same
// directory and continued by a resumed one.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "mesh/events.h"
#include "mesh/step_log.h"
#include "support/temp_dirs.h"

using namespace sal::mesh;
using namespace sal::job;

TEST_CASE("the load window averages the last steps per layer and expert, forgetting older ones") {
  LoadWindow w(2, 3, 2);
  CHECK(w.empty());
  w.add({1, 2, 3, 4, 5, 6});
  w.add({3, 2, 1, 0, 1, 2});
  w.add({5, 5, 5, 5, 5, 5});  // the first step falls out
  auto m = w.mean();
  REQUIRE(m.size() == 2);
  CHECK(m[0] == std::vector<double>{4, 3.5, 3});
  CHECK(m[1] == std::vector<double>{2.5, 3, 3.5});
  w.add({1, 2});  // a malformed step is ignored
  CHECK(w.steps() == 2);
  // the recent steps one by one, oldest first, [layer][expert]: what the placement judges on
  auto recent = w.recent(5);
  REQUIRE(recent.size() == 2);
  CHECK(recent[0] == std::vector<std::vector<uint32_t>>{{3, 2, 1}, {0, 1, 2}});
  CHECK(recent[1] == std::vector<std::vector<uint32_t>>{{5, 5, 5}, {5, 5, 5}});
  CHECK(w.recent(1) == sal::policy::StepLoads{recent[1]});
  w.add({uint64_t(1) << 40, 0, 0, 0, 0, 0});  // a count past 32 bits is clamped
  CHECK(w.recent(1)[0][0][0] == UINT32_MAX);
  CHECK(LoadWindow(1, 1, 4).recent(3).empty());
}

TEST_CASE("imbalance: each expert's tokens shared over its replicas, busiest worker over the mean") {
  // one layer, 2 experts; expert 0 has 300 tokens, expert 1 has 100
  std::vector<uint64_t> loads{300, 100};
  for (bool by_counts : {false, true}) {
    // uniform: each worker one expert -> 300 vs 100, mean 200
    CHECK(expert_imbalance(loads, {{{0}, {1}}}, 2, by_counts) == doctest::Approx(1.5));
    // two slots of expert 0 on worker 1 take two thirds of its tokens: 100 + 100 vs 200, even
    CHECK(expert_imbalance(loads, {{{0, 1}, {0, 0}}}, 2, by_counts) == doctest::Approx(1.0));
    CHECK(expert_imbalance({0, 0}, {{{0}, {1}}}, 2, by_counts) == 1.0);     // nothing routed: even
    CHECK(expert_imbalance({1, 2, 3}, {{{0}, {1}}}, 2, by_counts) == 1.0);  // sizes that do not fit: no verdict
  }
  // expert 0 on both workers, expert 1 on one: evenly 150 + 100 vs 150; by counts 100 + 100 vs 200
  CHECK(expert_imbalance(loads, {{{0, 1}, {0}}}, 2, false) == doctest::Approx(250.0 / 200.0));
  CHECK(expert_imbalance(loads, {{{0, 1}, {0}}}, 2, true) == doctest::Approx(1.0));
  // two layers: the mean of their imbalances
  CHECK(expert_imbalance({300, 100, 300, 100}, {{{0}, {1}}, {{0, 1}, {0, 0}}}, 2, false) == doctest::Approx(1.25));
}

TEST_CASE("the metrics log keeps the first and last records and the run's tokens per second") {
  StepLog log;
  CHECK(log.first() == nullptr);
  for (uint64_t s = 0; s < 5; ++s) {
    StepRecord r;
    r.step = s;
    r.loss = 5.0 - double(s);
    r.tokens = 1000;
    r.step_ms = 100;
    log.add(r);
  }
  CHECK(log.count() == 5);
  CHECK(log.first()->loss == 5.0);
  CHECK(log.last()->loss == 1.0);
  CHECK(log.tokens_per_s() == doctest::Approx(10000));
  CHECK(log.mean_loss(2) == doctest::Approx(1.5));
  CHECK(log.recent_tokens_per_s(3) == doctest::Approx(10000));
}

TEST_CASE("metrics.csv resumed at a step drops the rows of later steps and continues after the rest") {
  std::string path = sal::test::temp_dir("metrics") + "/metrics.csv";
  {
    StepLog log;
    REQUIRE(log.open_csv(path).ok());
    for (uint64_t s = 0; s < 5; ++s) log.add(StepRecord{.step = s, .loss = 9.0 - double(s), .tokens = 100, .step_ms = 10});
  }
  {
    StepLog log;  // the journal committed steps 0..2: the rows of 3 and 4 were written before a commit it never saw
    REQUIRE(log.open_csv(path, uint64_t(3)).ok());
    // the rows kept are read back: the summary of a resumed job counts from its first step
    CHECK(log.count() == 3);
    REQUIRE(log.first());
    CHECK(log.first()->loss == 9.0);
    CHECK(log.last()->step == 2);
    CHECK(log.tokens() == 300);
    CHECK(log.tokens_per_s() == doctest::Approx(10000));
    log.add(StepRecord{.step = 3});
    CHECK(log.count() == 4);
  }
  std::ifstream in(path);
  std::vector<std::string> steps;
  for (std::string line; std::getline(in, line);) steps.push_back(line.substr(0, line.find(',')));
  CHECK(steps == std::vector<std::string>{"step", "0", "1", "2", "3"});
}

TEST_CASE("events.csv: a new run in a used directory replaces it, a resumed controller continues it") {
  const std::string path = sal::test::temp_dir("events") + "/events.csv";
  auto write = [&](bool append, const std::string& kind) {
    EventLog log;
    log.open_csv(path, append);
    log.add(kind, 1, 1, "");
  };
  write(false, "first_run");
  write(false, "second_run");  // a killed run's events would otherwise count in this run's report
  CHECK(EventLog::count_kinds(path) == std::map<std::string, uint64_t>{{"second_run", 1}});
  write(true, "resumed");
  CHECK(EventLog::count_kinds(path) == std::map<std::string, uint64_t>{{"resumed", 1}, {"second_run", 1}});
}

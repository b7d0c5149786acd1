// test_sim.cpp — the simulator's foundations: the event core pops in time order with a stable
// tie-break; runs are deterministic for a seed; exponential failures give Poisson counts (mean and
// variance λT) and Weibull draws the law's mean; the ETTR simulation agrees with its closed form;
// `salamander sim spare` and `sim ettr` print Monte Carlo beside closed forms that agree.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "sim/ettr.h"
#include "sim/event_queue.h"
#include "sim/failures.h"

using namespace sal;
using namespace sal::sim;

namespace {

// The binary's stdout and stderr; CHECKs its exit status.
std::string run(const std::string& args, int expect_status = 0) {
  std::string out;
  FILE* f = popen(("(" + std::string(SAL_BIN) + " " + args + ") 2>&1").c_str(), "r");
  REQUIRE(f);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  int status = pclose(f);
  CHECK(WEXITSTATUS(status) == expect_status);
  return out;
}

}  // namespace

TEST_CASE("the event core pops in time order, ties in scheduling order") {
  EventQueue q;
  q.schedule(5, 1, 50);
  q.schedule(1, 2, 10);
  q.schedule(5, 3, 51);
  q.schedule(0.5, 4, 5);
  std::vector<int64_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  CHECK(order == std::vector<int64_t>{5, 10, 50, 51});
  CHECK(q.popped() == 4);
}

TEST_CASE("exponential failures of a node population are a Poisson process: mean and variance of counts") {
  // 50 nodes, each failing with mean 1000 s and replaced at once; count failures in 200 s windows.
  auto law = exponential(1000);
  REQUIRE(law.ok());
  algo::Rng rng(7);
  const int nodes = 50, trials = 4000;
  const double window = 200, expect = nodes * window / 1000;  // λT = 10
  double sum = 0, sum_sq = 0;
  for (int t = 0; t < trials; ++t) {
    EventQueue q;
    for (int n = 0; n < nodes; ++n) q.schedule(time_to_failure(*law, rng), 0, n);
    int count = 0;
    while (q.top().time < window) {
      Event e = q.pop();
      ++count;
      q.schedule(e.time + time_to_failure(*law, rng), 0, e.a);
    }
    sum += count;
    sum_sq += double(count) * count;
  }
  double mean = sum / trials, var = sum_sq / trials - mean * mean;
  MESSAGE("failures per window: mean " << mean << ", variance " << var << " (Poisson: both " << expect << ")");
  CHECK(mean == doctest::Approx(expect).epsilon(0.02));
  CHECK(var == doctest::Approx(expect).epsilon(0.08));
}

TEST_CASE("Weibull draws have the law's mean, and shape k < 1 is over-dispersed") {
  auto law = weibull(600, 0.78);
  REQUIRE(law.ok());
  algo::Rng rng(3);
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = time_to_failure(*law, rng);
    sum += x;
    sum_sq += x * x;
  }
  double mean = sum / n, cv = std::sqrt(sum_sq / n - mean * mean) / mean;
  CHECK(mean == doctest::Approx(600).epsilon(0.01));
  CHECK(cv > 1.1);  // an exponential's coefficient of variation is 1
  CHECK_FALSE(weibull(600, 0).ok());
  CHECK_FALSE(exponential(-1).ok());
}

TEST_CASE("the ETTR simulation is deterministic for a seed and matches the closed form") {
  for (auto [mtbf, interval, ckpt, restart] : {std::tuple{3600.0, 100, 10.0, 60.0}, std::tuple{600.0, 50, 5.0, 120.0},
                                                std::tuple{300.0, 200, 2.0, 30.0}}) {
    EttrModel m{1.0, interval, ckpt, restart, *exponential(mtbf)};
    auto a = simulate_ettr(m, 1000, 20, 11), b = simulate_ettr(m, 1000, 20, 11), c = simulate_ettr(m, 1000, 20, 12);
    REQUIRE(a.ok());
    CHECK(a->ettr == b->ettr);
    CHECK(a->events == b->events);
    CHECK(a->ettr != c->ettr);
    auto closed = ettr_closed_form(m);
    REQUIRE(closed.ok());
    MESSAGE("MTBF " << mtbf << ": simulated " << a->ettr << " ± " << a->stderr_ettr << ", closed form " << *closed);
    CHECK(std::abs(a->ettr - *closed) < std::max(4 * a->stderr_ettr, 0.002));
  }
  EttrModel w{1.0, 100, 10.0, 60.0, *weibull(3600, 0.78)};
  CHECK_FALSE(ettr_closed_form(w).ok());
  CHECK(simulate_ettr(w, 100, 2, 1).ok());
  EttrModel bad{1.0, 0, 10.0, 60.0, *exponential(10)};
  CHECK_FALSE(simulate_ettr(bad, 10, 1, 1).ok());
}

TEST_CASE("salamander sim spare and sim ettr: the Monte Carlo beside closed forms that agree") {
  auto spare = nlohmann::json::parse(run("sim spare --groups 200 --redundancy 3 --trials 400 --json"));
  double mc = spare["mean_failures"], mu = spare["mean_failures_closed_form"];
  CHECK(mc == doctest::Approx(mu).epsilon(0.06));
  CHECK(spare["mean_depth"].get<double>() >= spare["mean_depth_lower_bound"].get<double>() - 1e-9);
  auto ettr = nlohmann::json::parse(run("sim ettr --mtbf 3600 --iter-time 1 --interval 100 --ckpt-time 10 --json"));
  CHECK(ettr["ettr"].get<double>() == doctest::Approx(ettr["ettr_closed_form"].get<double>()).epsilon(0.01));
  std::string bad = run("sim ettr --mtbf 3600 --iter-time 1 --ckpt-time 10 --json", 2);
  CHECK(bad.find("--interval N is required") != std::string::npos);
}

// bench_metrics.cpp — what the Prometheus endpoint costs the controller's loop. The loop sets the
// registry (MetricsExport::update after every batch of driver actions and every mesh message,
// event() per event); civetweb's threads collect and serialize it for each scrape. Timed here: one
// update() and one event() on the loop's side with nobody scraping (the peer) and while another
// thread scrapes over HTTP as fast as it can (the contention a scrape can cause is a few shared
// locks, never a wait on I/O), and one whole scrape over a loopback socket.
//
//   build/bench_metrics [rounds]      (default 10000, about 1.5 s each way)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "metrics/endpoint.h"
#include "metrics/export.h"
#include "support/bench_table.h"
#include "support/prom_scrape.h"

using namespace sal;
using namespace sal::metrics;
using Clock = std::chrono::steady_clock;

namespace {

JobState state(uint64_t step) {
  JobState s;
  s.steps_committed = step;
  s.steps_target = 1000000;
  s.tokens = step * 1024;
  s.tokens_per_s = 18000;
  job::StepRecord r;
  r.step = step;
  r.loss = 3.0;
  s.last = r;
  s.nodes_live = s.nodes_expected = s.workers_live = 8;
  s.epoch = 9;
  s.plan = 4;
  s.phase = job::Phase::running;
  s.policy_generations = {1, 1, 1, 1};
  return s;
}

struct Trial {
  double update_us = 0, event_us = 0;
};

// `rounds` updates and events, each timed, 100 µs apart (as a loop between messages; the run spans
// long enough for many scrapes to overlap it).
std::vector<Trial> loop_side(MetricsExport& m, int rounds) {
  static const char* kKinds[] = {"plan", "plan_applied", "node_joined", "step_aborted", "snapshot_saved"};
  std::vector<Trial> out(static_cast<size_t>(rounds));
  for (int i = 0; i < rounds; ++i) {
    JobState s = state(uint64_t(i));
    auto t0 = Clock::now();
    m.update(s);
    auto t1 = Clock::now();
    m.event(kKinds[i % 5]);
    auto t2 = Clock::now();
    out[size_t(i)] = {std::chrono::duration<double, std::micro>(t1 - t0).count(),
                      std::chrono::duration<double, std::micro>(t2 - t1).count()};
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return out;
}

void print_row(const char* what, std::vector<double> v, const char* unit) {
  std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %s |\n", what, test::percentile(v, 0.5), test::percentile(v, 0.99),
              test::percentile(v, 0.999), test::percentile(v, 1.0), unit);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 10000;
  MetricsExport m("bench");
  for (int i = 0; i < 20; ++i) m.recovery(0.1 * i, 0), m.policy_decision(policy::Kind::placement, 0.5);
  auto ep = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:*"}, m.registry());
  if (!ep) {
    std::fprintf(stderr, "bench_metrics: %s\n", ep.error().message().c_str());
    return 1;
  }
  const std::string url = (*ep)->url();

  auto idle = loop_side(m, rounds);

  std::atomic<bool> stop{false};
  std::atomic<size_t> scrapes{0};
  std::vector<double> scrape_ms;  // the scraper's own until it is joined
  size_t bytes = 0;
  std::thread scraper([&] {
    while (!stop) {
      auto t0 = Clock::now();
      auto body = test::http_get(url);
      if (!body) continue;
      bytes = body->size();
      scrape_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      ++scrapes;
    }
  });
  while (scrapes < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto busy = loop_side(m, rounds);
  stop = true;
  scraper.join();

  auto column = [](const std::vector<Trial>& t, double Trial::*f) {
    std::vector<double> v;
    for (const auto& x : t) v.push_back(x.*f);
    return v;
  };
  std::printf("metrics endpoint: %d loop-side rounds each way; %zu scrapes of %zu bytes\n\n", rounds,
              scrape_ms.size(), bytes);
  std::printf("| what | p50 | p99 | p99.9 | max | unit |\n| --- | ---: | ---: | ---: | ---: | --- |\n");
  print_row("update(), nobody scraping", column(idle, &Trial::update_us), "µs");
  print_row("update(), scraped without pause", column(busy, &Trial::update_us), "µs");
  print_row("event(), nobody scraping", column(idle, &Trial::event_us), "µs");
  print_row("event(), scraped without pause", column(busy, &Trial::event_us), "µs");
  print_row("one scrape over HTTP (loopback)", scrape_ms, "ms");
  return 0;
}

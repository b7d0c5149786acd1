// t0330_metrics.cpp — the controller's Prometheus endpoint, scraped over HTTP as Prometheus does it
// while a real job trains (`salamander run --metrics tcp://127.0.0.1:*`): the address printed at
// start is the one bound and lands in summary.json; two scrapes a while apart parse as exposition
// text (HELP and TYPE lines, `name{labels} value`) and show the step advancing, a finite loss and
// every worker live; clients that connect and never ask hold every thread of the endpoint while the
// job goes on training; nothing listens once the run is over. A port already taken refuses the
// start, naming metrics.bind, before any agent is started; a malformed --metrics is a usage error;
// a standalone controller serves the same endpoint. The Grafana dashboard shipped in
// scripts/grafana queries only metrics a running endpoint serves, and shows every one of them.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "support/loopback.h"
#include "support/mesh_harness.h"
#include "support/prom_scrape.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// What every scrape of a job named `job` with `workers` workers must show.
void check_scrape(const PromText& t, const std::string& job, int workers) {
  for (const char* family : {"salamander_step", "salamander_loss", "salamander_tokens_per_second",
                             "salamander_live_workers", "salamander_live_nodes", "salamander_recoveries_total",
                             "salamander_recovery_seconds", "salamander_policy_generation",
                             "salamander_policy_decision_seconds", "salamander_snapshot_latest_step", "salamander_epoch",
                             "salamander_plan"}) {
    CAPTURE(family);
    CHECK(t.type.count(family) == 1);
    CHECK(t.help.count(family) == 1);
  }
  for (const auto& s : t.samples) {  // ours, and prometheus-cpp's own exposer_* (scrapes served)
    CAPTURE(s.name);
    if (s.name.rfind("exposer_", 0) == 0) continue;
    CHECK(s.name.rfind("salamander_", 0) == 0);
    CHECK(s.labels.at("job_name") == job);
  }
  CHECK(t.value("exposer_scrapes_total").has_value());
  double loss = t.value("salamander_loss").value_or(NAN);
  CHECK(std::isfinite(loss));
  CHECK(loss > 0);
  CHECK(t.value("salamander_live_workers") == workers);
  CHECK(t.value("salamander_live_nodes") == workers);
  CHECK(t.value("salamander_plan").value_or(0) >= 1);
  // training: running, or planning for a moment (a rebalance every train.rebalance_every steps)
  double phases = 0;
  for (const auto& s : t.samples)
    if (s.name == "salamander_phase") phases += s.value;
  CHECK(phases == 1);
  CHECK(t.value("salamander_phase", {{"phase", "running"}}).value_or(0) +
            t.value("salamander_phase", {{"phase", "planning"}}).value_or(0) ==
        1);
  CHECK(t.value("salamander_policy_generation", {{"slot", "placement"}}) == 1);
  CHECK(t.value("salamander_policy_decision_seconds_count", {{"slot", "placement"}}).value_or(0) >= 1);
}

// "http://127.0.0.1:40123/metrics" -> 40123
int port_of(const std::string& url) {
  auto colon = url.rfind(':');
  return std::stoi(url.substr(colon + 1, url.find('/', colon) - colon - 1));
}

// Connections to 127.0.0.1:port that send nothing.
std::vector<int> idle_clients(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    fds.push_back(connect_loopback(port));
    REQUIRE(fds.back() >= 0);
  }
  return fds;
}

size_t metrics_rows(const std::string& run_dir) { return occurrences(file_text(run_dir + "/metrics.csv"), "\n"); }

}  // namespace

TEST_CASE("t0330-metrics-scrape: Prometheus scrapes the controller over HTTP while the job trains") {
  std::string dir = temp_dir("metrics");
  Proc run = spawn({bin(), "run", tiny_job(dir, "prom"), "--nodes", "3", "--steps", "1000000", "--metrics",
                    "tcp://127.0.0.1:*", "--out", dir + "/out"},
                   dir + "/run.out");
  const std::string url = run.wait_for_line("metrics  ", 10000);
  REQUIRE_MESSAGE(url.rfind("http://127.0.0.1:", 0) == 0, run.output());

  // the first scrape once steps are committed
  Result<PromText> first = fail("not scraped yet");
  REQUIRE_MESSAGE(eventually([&] {
                    first = scrape(url);
                    return first.ok() && first->value("salamander_step").value_or(0) >= 5;
                  }, 30000, 50),
                  (first.ok() ? run.output() : first.error().message()));
  check_scrape(*first, "prom", 3);
  const double step1 = *first->value("salamander_step");

  // clients that connect and never send a request hold every thread of the endpoint (and queue
  // behind them): the controller's loop never waits on them, so steps keep committing
  {
    std::vector<int> idle = idle_clients(port_of(url), 4);
    CHECK_FALSE(http_get(url, 300).ok());  // the endpoint is stuck: a scrape now waits behind them
    const size_t rows = metrics_rows(dir + "/out");
    CHECK(eventually([&] { return metrics_rows(dir + "/out") >= rows + 10; }, 15000, 50));
    for (int fd : idle) close(fd);
  }

  // the second scrape: the step has advanced, every worker is still live
  Result<PromText> second = fail("not scraped yet");
  REQUIRE_MESSAGE(eventually([&] {
                    second = scrape(url);
                    return second.ok() && second->value("salamander_step").value_or(0) >= step1 + 10;
                  }, 15000, 50),
                  (second.ok() ? run.output() : second.error().message()));
  check_scrape(*second, "prom", 3);
  CHECK(*second->value("salamander_tokens_total") > *first->value("salamander_tokens_total"));
  CHECK(second->value("salamander_aborted_steps_total").has_value());
  CHECK(second->value("salamander_events_total", {{"kind", "node_joined"}}) == 3);

  run.signal(SIGINT);
  REQUIRE(run.wait(20000) == 130);
  auto summary = nlohmann::json::parse(file_text(dir + "/out/summary.json"));
  CHECK(summary["metrics_url"] == url);
  CHECK_FALSE(http_get(url, 1000).ok());  // nothing listens once the run is over
}

TEST_CASE("t0332-metrics-across-controller-resume: the counters a resumed controller serves go on from the run's, none starts again at zero") {
  std::string dir = temp_dir("metrics-resume");
  int port = 0;
  {
    LoopbackListener probe;  // a free port, given back for the job's fixed metrics.bind
    port = probe.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  std::ofstream(dir + "/drill.lua") << "drill{ name = 'metrics-resume', steps = 100000, seed = 2 }\n"
                                       "kill{ node = 'random', step = 10 }\n"
                                       "add{ count = 1, step = 12 }\n"
                                       "kill{ controller = true, step = 60, restart_after_s = 0.5 }\n";
  Proc run = spawn({bin(), "run", tiny_job(dir, "prom"), "--nodes", "3", "--metrics", "tcp://127.0.0.1:" + std::to_string(port),
                    "--drill", dir + "/drill.lua", "--out", dir + "/out"},
                   dir + "/run.out");
  // before the controller's death: a recovery, an aborted step or not, events of several kinds
  Result<PromText> before = fail("not scraped yet");
  REQUIRE_MESSAGE(eventually([&] {
                    before = scrape(url);
                    return before.ok() && before->value("salamander_step").value_or(0) >= 30 &&
                           before->value("salamander_recoveries_total").value_or(0) >= 1;
                  }, 60000, 50),
                  (before.ok() ? run.output() : before.error().message()));
  REQUIRE(before->value("salamander_step").value_or(0) < 60);
  // after it: the new controller serves again, past the step it died at
  Result<PromText> after = fail("not scraped yet");
  REQUIRE_MESSAGE(eventually([&] {
                    after = scrape(url);
                    return after.ok() && after->value("salamander_step").value_or(0) >= 80 &&
                           after->value("salamander_events_total", {{"kind", "controller_resumed"}}).value_or(0) >= 1;
                  }, 60000, 50),
                  (after.ok() ? run.output() : after.error().message()));
  for (const char* counter : {"salamander_tokens_total", "salamander_recoveries_total", "salamander_aborted_steps_total",
                              "salamander_restores_total", "salamander_lost_steps_total"}) {
    CAPTURE(counter);
    CHECK(after->value(counter).value_or(-1) >= before->value(counter).value_or(0));
  }
  CHECK(after->value("salamander_recovery_seconds_count").value_or(-1) >=
        before->value("salamander_recovery_seconds_count").value_or(0));
  int kinds = 0;
  for (const auto& s : before->samples)
    if (s.name == "salamander_events_total") {
      CAPTURE(s.labels.at("kind"));
      CHECK(after->value("salamander_events_total", {{"kind", s.labels.at("kind")}}).value_or(-1) >= s.value);
      ++kinds;
    }
  CHECK(kinds >= 4);  // node_joined, node_left, plan, step_aborted or recovery, ...
  run.signal(SIGINT);
  CHECK(run.wait(30000) == 130);
}

TEST_CASE("t0331-metrics-port-taken: a taken port refuses the start naming metrics.bind, and a bad --metrics is a usage error") {
  std::string dir = temp_dir("metrics-taken");
  LoopbackListener taken;
  const std::string p = std::to_string(taken.port());
  Proc run = spawn({bin(), "run", tiny_job(dir, "prom"), "--nodes", "2", "--metrics", "tcp://127.0.0.1:" + p, "--out",
                    dir + "/out"},
                   dir + "/run.out");
  CHECK(run.wait(15000) == 1);
  std::string out = run.output();
  CHECK(out.find("salamander run: metrics.bind: cannot listen on 127.0.0.1:" + p + ": Address already in use") !=
        std::string::npos);
  CHECK(out.find("mesh  ") == std::string::npos);  // refused before the mesh, so before any agent

  Proc bad = spawn({bin(), "run", tiny_job(dir, "prom"), "--metrics", "http://127.0.0.1:9464"}, dir + "/bad.out");
  CHECK(bad.wait(10000) == 2);
  CHECK(bad.output().find("--metrics: \"http://127.0.0.1:9464\" is not an endpoint (expected tcp://HOST:PORT") !=
        std::string::npos);
}

TEST_CASE("t0332-controller-metrics: a standalone controller serves the same endpoint") {
  std::string dir = temp_dir("metrics-ctl");
  Proc ctl = spawn({bin(), "controller", tiny_job(dir, "ctl"), "--steps", "0", "--metrics", "tcp://127.0.0.1:*"},
                   dir + "/ctl.out");
  const std::string url = ctl.wait_for_line("metrics ", 10000);
  REQUIRE_MESSAGE(url.rfind("http://127.0.0.1:", 0) == 0, ctl.output());
  auto t = scrape(url);
  REQUIRE_MESSAGE(t.ok(), t.error().message());
  CHECK(t->value("salamander_step", {{"job_name", "ctl"}}) == 0);
  CHECK(t->value("salamander_live_nodes") == 0);
  CHECK(t->value("salamander_expected_nodes") == 4);
  CHECK(t->value("salamander_phase", {{"phase", "gathering"}}) == 1);
  CHECK(t->value("salamander_events_total", {{"kind", "controller_started"}}) == 1);
  ctl.signal(SIGINT);
  CHECK(ctl.wait(10000) == 130);
}

namespace {

// The salamander_* names a PromQL expression reads.
std::set<std::string> metric_names(const std::string& expr) {
  static const std::regex name("salamander_[a-z_]+");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name); it != std::sregex_iterator(); ++it)
    out.insert(it->str());
  return out;
}

// The family a sample name belongs to: a histogram's _bucket, _sum and _count are its own.
std::string family_of(const std::string& name, const PromText& t) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      std::string base = name.substr(0, name.size() - s.size());
      if (t.type.count(base) && t.type.at(base) == "histogram") return base;
    }
  }
  return name;
}

}  // namespace

TEST_CASE("t0333-grafana-dashboard: every metric the shipped dashboard queries exists on a running endpoint, and it shows them all") {
  std::ifstream in(std::string(SAL_SOURCE_DIR) + "/scripts/grafana/salamander.json");
  REQUIRE(in.good());
  auto dash = nlohmann::json::parse(in);
  std::string dir = temp_dir("grafana");
  Proc run = spawn({bin(), "run", tiny_job(dir, "dash"), "--nodes", "2", "--steps", "1000000", "--metrics",
                    "tcp://127.0.0.1:*", "--out", dir + "/out"},
                   dir + "/run.out");
  const std::string url = run.wait_for_line("metrics  ", 10000);
  REQUIRE_MESSAGE(url.rfind("http://127.0.0.1:", 0) == 0, run.output());
  Result<PromText> t = fail("not scraped yet");
  REQUIRE_MESSAGE(eventually([&] {
                    t = scrape(url);
                    return t.ok() && t->value("salamander_step").value_or(0) >= 3;
                  }, 30000, 50),
                  (t.ok() ? run.output() : t.error().message()));
  run.signal(SIGINT);
  CHECK(run.wait(20000) == 130);

  // every panel: a Prometheus query per target, on the dashboard's datasource, for the chosen job
  std::set<std::string> queried;
  std::set<int> ids;
  for (const auto& panel : dash["panels"]) {
    CAPTURE(panel["title"].get<std::string>());
    CHECK(ids.insert(panel["id"].get<int>()).second);
    CHECK(panel["datasource"]["uid"] == "${datasource}");
    REQUIRE(!panel["targets"].empty());
    for (const auto& target : panel["targets"]) {
      const std::string expr = target["expr"];
      CAPTURE(expr);
      auto names = metric_names(expr);
      CHECK(!names.empty());
      // each selector names the job (one Prometheus may scrape several)
      CHECK(occurrences(expr, "{job_name=\"$job_name\"") == occurrences(expr, "salamander_"));
      for (const auto& n : names) {
        const std::string family = family_of(n, *t);
        CHECK_MESSAGE(t->type.count(family) == 1, n << " is not served by the endpoint");
        queried.insert(family);
      }
    }
  }
  // the job picker's query reads a served metric
  const std::string picker = dash["templating"]["list"][1]["definition"];
  for (const auto& n : metric_names(picker)) CHECK(t->type.count(n) == 1);
  // and nothing the endpoint serves is missing from the dashboard
  for (const auto& [family, type] : t->type) {
    if (family.rfind("salamander_", 0) != 0) continue;
    CHECK_MESSAGE(queried.count(family) == 1, family << " is served but no panel shows it");
  }
}

// test_export.cpp — the controller's Prometheus registry as pure logic (what a state, a
// recovery, a decision, a snapshot and an event set, read back through the text a scrape gets),
// and the endpoint serving it over a real socket: the port it bound, and a taken port refused
// with the reason.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <fstream>

#include <prometheus/text_serializer.h>

#include <cmath>

#include "metrics/endpoint.h"
#include "metrics/export.h"
#include "support/loopback.h"
#include "support/prom_scrape.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::metrics;
using sal::test::PromText;

namespace {

PromText exposition(const MetricsExport& m) {
  auto text = sal::test::parse_prom_text(prometheus::TextSerializer().Serialize(m.registry()->Collect()));
  REQUIRE_MESSAGE(text.ok(), text.error().message());
  return *text;
}

JobState training_state() {
  JobState s;
  s.steps_committed = 120;
  s.steps_target = 600;
  s.steps_aborted = 2;
  s.tokens = 120 * 1024;
  s.tokens_per_s = 18000;
  job::StepRecord r;
  r.step = 119;
  r.loss = 3.25;
  r.grad_norm = 0.8;
  r.lr = 0.003;
  r.imbalance = 1.04;
  s.last = r;
  s.nodes_live = 3;
  s.nodes_expected = 4;
  s.workers_live = 3;
  s.epoch = 7;
  s.plan = 3;
  s.phase = job::Phase::running;
  s.policy_generations = {1, 2, 1, 1};
  return s;
}

const std::map<std::string, std::string> kJob{{"job_name", "quick"}};

}  // namespace

TEST_CASE("every metric is salamander_*, has HELP and TYPE, and carries the job's name") {
  MetricsExport m("quick");
  m.update(training_state());
  m.event("node_joined");
  PromText t = exposition(m);
  CHECK(t.type.size() >= 20);
  for (const auto& [family, type] : t.type) {
    CAPTURE(family);
    CHECK(family.rfind("salamander_", 0) == 0);
    CHECK_FALSE(t.help[family].empty());
  }
  for (const auto& s : t.samples) {
    CAPTURE(s.name);
    CHECK(s.labels.at("job_name") == "quick");
  }
  CHECK(t.type["salamander_step"] == "gauge");
  CHECK(t.type["salamander_recoveries_total"] == "counter");
  CHECK(t.type["salamander_recovery_seconds"] == "histogram");
  CHECK(t.type["salamander_policy_decision_seconds"] == "histogram");
}

TEST_CASE("the state: gauges follow it, counters advance to its totals and never back") {
  MetricsExport m("quick");
  JobState s = training_state();
  m.update(s);
  PromText t = exposition(m);
  CHECK(t.value("salamander_step", kJob) == 120);
  CHECK(t.value("salamander_steps_target") == 600);
  CHECK(t.value("salamander_loss") == 3.25);
  CHECK(t.value("salamander_grad_norm") == 0.8);
  CHECK(t.value("salamander_learning_rate") == 0.003);
  CHECK(t.value("salamander_expert_imbalance") == 1.04);
  CHECK(t.value("salamander_tokens_per_second") == 18000);
  CHECK(t.value("salamander_tokens_total") == 120 * 1024);
  CHECK(t.value("salamander_live_nodes") == 3);
  CHECK(t.value("salamander_expected_nodes") == 4);
  CHECK(t.value("salamander_live_workers") == 3);
  CHECK(t.value("salamander_epoch") == 7);
  CHECK(t.value("salamander_plan") == 3);
  CHECK(t.value("salamander_aborted_steps_total") == 2);
  CHECK(t.value("salamander_phase", {{"phase", "running"}}) == 1);
  CHECK(t.value("salamander_phase", {{"phase", "gathering"}}) == 0);
  CHECK(t.value("salamander_policy_generation", {{"slot", "placement"}}) == 2);
  CHECK(t.value("salamander_policy_generation", {{"slot", "redundancy"}}) == 1);

  s.steps_committed = 121;
  s.steps_aborted = 5;
  s.restores = 1;
  s.steps_lost = 20;
  s.phase = job::Phase::planning;
  m.update(s);
  s.steps_aborted = 4;  // a total never goes back; were it to, the counter would not follow
  m.update(s);
  t = exposition(m);
  CHECK(t.value("salamander_step") == 121);
  CHECK(t.value("salamander_aborted_steps_total") == 5);
  CHECK(t.value("salamander_restores_total") == 1);
  CHECK(t.value("salamander_lost_steps_total") == 20);
  CHECK(t.value("salamander_phase", {{"phase", "planning"}}) == 1);
  CHECK(t.value("salamander_phase", {{"phase", "running"}}) == 0);
}

TEST_CASE("before the first step there is no loss to show, and nothing is made up") {
  MetricsExport m("quick");
  JobState s;
  s.nodes_expected = 4;
  m.update(s);
  PromText t = exposition(m);
  CHECK(t.value("salamander_step") == 0);
  CHECK(t.value("salamander_loss") == 0);
  CHECK(t.value("salamander_phase", {{"phase", "gathering"}}) == 1);
}

TEST_CASE("recoveries, decisions, snapshots and events are counted where they happen") {
  MetricsExport m("quick");
  m.recovery(0.12, 0);
  m.recovery(1.5, 40);  // 1.5 s of the engine's, 40 s waiting for workers
  m.policy_decision(policy::Kind::placement, 0.4);
  m.policy_decision(policy::Kind::placement, 3.0);
  m.policy_decision(policy::Kind::allocation, 0);
  m.plan_decision(4.2);
  m.snapshot_complete(50);
  for (const char* kind : {"snapshot_saved", "snapshot_saved", "snapshot_failed", "snapshot_dropped", "node_joined",
                           "node_joined", "node_dead"})
    m.event(kind);
  PromText t = exposition(m);
  CHECK(t.value("salamander_recoveries_total") == 2);
  CHECK(t.value("salamander_recovery_seconds_count") == 2);
  CHECK(t.value("salamander_recovery_seconds_sum") == doctest::Approx(1.62));
  CHECK(t.value("salamander_capacity_wait_seconds_total") == doctest::Approx(40));
  CHECK(t.value("salamander_recovery_seconds_bucket", {{"le", "0.15"}}) == 1);
  CHECK(t.value("salamander_recovery_seconds_bucket", {{"le", "2"}}) == 2);
  CHECK(t.value("salamander_recovery_seconds_bucket", {{"le", "+Inf"}}) == 2);
  CHECK(t.value("salamander_policy_decision_seconds_count", {{"slot", "placement"}}) == 2);
  CHECK(t.value("salamander_policy_decision_seconds_sum", {{"slot", "placement"}}) == doctest::Approx(0.0034));
  CHECK(t.value("salamander_policy_decision_seconds_count", {{"slot", "allocation"}}) == 1);
  CHECK(t.value("salamander_policy_decision_seconds_count", {{"slot", "checkpoint"}}) == 0);
  CHECK(t.value("salamander_plan_decision_seconds_sum") == doctest::Approx(0.0042));
  CHECK(t.value("salamander_snapshot_latest_step") == 50);
  CHECK(t.value("salamander_snapshots_total", {{"outcome", "complete"}}) == 2);
  CHECK(t.value("salamander_snapshots_total", {{"outcome", "failed"}}) == 1);
  CHECK(t.value("salamander_snapshots_total", {{"outcome", "dropped"}}) == 1);
  CHECK(t.value("salamander_events_total", {{"kind", "node_joined"}}) == 2);
  CHECK(t.value("salamander_events_total", {{"kind", "node_dead"}}) == 1);
  CHECK_FALSE(t.value("salamander_events_total", {{"kind", "plan"}}).has_value());  // none yet: no series
}

namespace {

// A file holding `text` (a token or a users list), in a fresh temporary directory.
std::string write_token_file(const std::string& text) {
  static int n = 0;
  std::string path = sal::test::temp_dir("metrics-auth") + "/credentials-" + std::to_string(++n);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("the endpoint serves the registry over HTTP on the port it bound") {
  MetricsExport m("quick");
  m.update(training_state());
  auto ep = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:*"}, m.registry());
  REQUIRE_MESSAGE(ep.ok(), ep.error().message());
  CHECK((*ep)->local());
  CHECK((*ep)->url().rfind("http://127.0.0.1:", 0) == 0);
  CHECK((*ep)->url().find(":0/") == std::string::npos);  // the port actually bound, not *
  auto t = sal::test::scrape((*ep)->url());
  REQUIRE_MESSAGE(t.ok(), t.error().message());
  CHECK(t->value("salamander_step", kJob) == 120);
  m.update([] {
    JobState s = training_state();
    s.steps_committed = 130;
    return s;
  }());
  CHECK(sal::test::scrape((*ep)->url())->value("salamander_step") == 130);  // what the loop set since
}

TEST_CASE("a port already taken is refused saying so, and so is a host that is not here") {
  sal::test::LoopbackListener taken;
  std::string port = std::to_string(taken.port());
  MetricsExport m("quick");
  auto ep = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:" + port}, m.registry());
  REQUIRE_FALSE(ep.ok());
  CHECK(ep.error().message() == "cannot listen on 127.0.0.1:" + port + ": Address already in use");
  // TEST-NET-1: no host has it (with a token: beyond loopback the endpoint needs one)
  std::string token = write_token_file("0123456789abcdef0123");
  auto away = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://192.0.2.1:9464", .token = token}, m.registry());
  REQUIRE_FALSE(away.ok());
  CHECK(away.error().message().find("cannot listen on 192.0.2.1:9464: ") == 0);
}

TEST_CASE("beyond loopback the endpoint needs a token or users, and then answers only their holders") {
  MetricsExport m("quick");
  m.update(training_state());
  auto open = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://*:*"}, m.registry());
  REQUIRE_FALSE(open.ok());
  CHECK(open.error().message().find("is reachable from other hosts: refusing to serve the job's numbers") !=
        std::string::npos);
  std::string token = write_token_file("0123456789abcdef0123");
  std::string users = write_token_file("# scrapers\nprom s3cret-pass\n");
  auto ep = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:*", .token = token, .users = users},
                                   m.registry());
  REQUIRE_MESSAGE(ep.ok(), ep.error().message());
  const std::string url = (*ep)->url();
  auto none = sal::test::http_get(url);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("401") != std::string::npos);
  CHECK_FALSE(sal::test::http_get(url, 5000, "Bearer 0123456789abcdef0124").ok());
  CHECK_FALSE(sal::test::http_get(url, 5000, "Basic cHJvbTp3cm9uZw==").ok());  // prom:wrong
  auto bearer = sal::test::scrape(url, 5000, "Bearer 0123456789abcdef0123");
  REQUIRE_MESSAGE(bearer.ok(), bearer.error().message());
  CHECK(bearer->value("salamander_step", kJob) == 120);
  CHECK(sal::test::scrape(url, 5000, "Basic cHJvbTpzM2NyZXQtcGFzcw==").ok());  // prom:s3cret-pass
  // A token too short to be a secret is refused at start.
  auto weak = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:*", .token = write_token_file("abc")},
                                     m.registry());
  REQUIRE_FALSE(weak.ok());
  CHECK(weak.error().message().find("a token of at least 16 characters") != std::string::npos);
}

TEST_CASE("with metrics.tls the endpoint serves HTTPS only, with its certificate, behind the same credentials") {
  const std::string cert = SAL_SOURCE_DIR "/tests/support/tls/test-cert.pem";
  MetricsExport m("quick");
  m.update(training_state());
  std::string token = write_token_file("0123456789abcdef0123");
  auto ep = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:*", .token = token, .tls = cert},
                                   m.registry());
  REQUIRE_MESSAGE(ep.ok(), ep.error().message());
  const std::string url = (*ep)->url();
  REQUIRE(url.rfind("https://127.0.0.1:", 0) == 0);
  auto t = sal::test::scrape(url, 5000, "Bearer 0123456789abcdef0123", cert);
  REQUIRE_MESSAGE(t.ok(), t.error().message());
  CHECK(t->value("salamander_step", kJob) == 120);
  auto no_token = sal::test::http_get(url, 5000, "", cert);
  REQUIRE_FALSE(no_token.ok());
  CHECK(no_token.error().message().find("401") != std::string::npos);
  // Plain HTTP to the TLS port gets no HTTP answer.
  std::string plain = "http://" + url.substr(8);
  CHECK_FALSE(sal::test::http_get(plain, 2000, "Bearer 0123456789abcdef0123").ok());
  // A file without a certificate is refused at start, saying so.
  auto bad = MetricsEndpoint::start(job::MetricsConfig{.bind = "tcp://127.0.0.1:*", .token = token, .tls = token},
                                    m.registry());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("metrics.tls") != std::string::npos);
  CHECK(bad.error().message().find("no certificate") != std::string::npos);
}

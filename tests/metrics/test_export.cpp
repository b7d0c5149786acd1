// test_export.cpp — the controller's Prometheus registry as pure logic (what a state, a
// recovery, a decision, a snapshot and an event set, read back through the text a scrape gets),
// and the endpoint serving it over a real socket: the port it bound, and a taken port refused
// with the reason.
#include <doctest/doctest.h>

#include <prometheus/text_serializer.h>

#include <cmath>

#include "metrics/endpoint.h"
#include "metrics/export.h"
#include "support/loopback.h"
#include "support/prom_scrape.h"

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
  m.recovery(0.12);
  m.recovery(1.5);
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

TEST_CASE("the endpoint serves the registry over HTTP on the port it bound") {
  MetricsExport m("quick");
  m.update(training_state());
  auto ep = MetricsEndpoint::start("tcp://127.0.0.1:*", m.registry());
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
  auto ep = MetricsEndpoint::start("tcp://127.0.0.1:" + port, m.registry());
  REQUIRE_FALSE(ep.ok());
  CHECK(ep.error().message() == "cannot listen on 127.0.0.1:" + port + ": Address already in use");
  auto away = MetricsEndpoint::start("tcp://192.0.2.1:9464", m.registry());  // TEST-NET-1: no host has it
  REQUIRE_FALSE(away.ok());
  CHECK(away.error().message().find("cannot listen on 192.0.2.1:9464: ") == 0);
}

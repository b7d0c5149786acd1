// driver_harness.h — drives a job::Driver with events and reads its actions, for the driver's
// tests: no processes, no sockets, no clock (time is what the test says it is). The planner's
// answers are made here: every worker holds `slots` experts, dealt round robin, so with 4 experts
// and 2 slots, workers 0 and 2 hold experts 0 and 1, workers 1 and 3 hold 2 and 3.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "job/driver.h"

namespace sal::job::test {

// The names of `count` units of the model from position `from` (model_units' order): what a
// rank's SaveDone says it wrote.
inline std::vector<std::string> unit_names(const ModelShape& s, size_t from, size_t count) {
  std::vector<std::string> names;
  auto all = model_units(s);
  for (size_t i = from; i < from + count && i < all.size(); ++i) names.push_back(all[i].name());
  return names;
}

inline DriverConfig small_job(uint32_t workers = 4) {
  DriverConfig c;
  c.model = ModelShape{2, 8, 4, 8, 16};  // 2 layers, 4 experts: 1 + 2 x (2 + 4) = 13 units
  c.expected_workers = workers;
  c.join_window_ms = 5000;
  c.join_batch_ms = 1000;
  c.rebalance_every = 0;
  c.checkpoint_every = 0;
  c.max_steps = 100;
  c.recovery = "elastic";
  c.slots = 2;
  c.min_replicas = 2;
  c.run_dir = "/run";
  c.origin_ns = 0;
  return c;
}

inline std::vector<Participant> workers(std::initializer_list<uint32_t> nodes) {
  std::vector<Participant> out;
  for (auto n : nodes) out.push_back({NodeId(n), 0});
  return out;
}

// A plan for `n` positions as the harness's planner decides it.
inline PlanRecord dealt_plan(uint32_t n, uint64_t version, uint32_t experts = 4, uint32_t slots = 2, uint32_t layers = 2) {
  PlanRecord r;
  r.plan.version = version;
  r.plan.nodes = n, r.plan.slots = slots, r.plan.experts = experts, r.plan.floor = 1;
  for (uint32_t l = 0; l < layers; ++l) {
    plan::LayerPlan layer;
    layer.replicas.assign(experts, 0);
    for (uint32_t w = 0; w < n; ++w) {
      std::vector<uint32_t> held;
      for (uint32_t s = 0; s < slots; ++s) held.push_back((w * slots + s) % experts);
      for (auto e : held) ++layer.replicas[e];
      layer.placement.push_back(held);
    }
    r.plan.layers.push_back(layer);
  }
  r.plan.schedule.window = 1, r.plan.schedule.period = 1;
  r.allocation_by = r.placement_by = r.checkpoint_by = r.redundancy_by = "test";
  return r;
}

class Harness {
  template <class A>
  static std::vector<A> of_kind(const std::vector<Action>& actions) {
    std::vector<A> r;
    for (const auto& a : actions)
      if (auto* x = std::get_if<A>(&a)) r.push_back(*x);
    return r;
  }

 public:
  explicit Harness(DriverConfig c = small_job()) : d(std::move(c)) {}
  // A driver resuming a job from its journal.
  Harness(DriverConfig c, const JournalState& journal) : d(std::move(c), journal) {}

  // One event, `after_ms` after the previous one; the actions it caused.
  const std::vector<Action>& on(Event e, int64_t after_ms = 0) {
    now_ns += after_ms * 1'000'000;
    out = d.handle({now_ns, std::move(e)});
    CHECK_MESSAGE(!noted("driver_error"), note_detail("driver_error"));  // every transition is in the table
    history.insert(history.end(), out.begin(), out.end());
    for (const auto& a : out)
      if (auto* ask = std::get_if<act::DecidePlan>(&a)) asked = *ask;
    return out;
  }

  // The ready workers' nodes are the live ones, each with a slice endpoint.
  const std::vector<Action>& membership(const std::vector<Participant>& ready, int64_t after_ms = 0) {
    ++epoch;
    View v{epoch, sorted(ready), "", {}, {}};
    for (const auto& p : ready) v.slices[p.node] = wire::SliceNode{p.node, "tcp://10.0.0." + std::to_string(p.node) + ":5000", ""};
    return on(in::Membership{std::move(v)}, after_ms);
  }
  // Node `node`'s agent holds the complete windows from..to of the units [first, first + count)
  // (model_units' order).
  const std::vector<Action>& slices(NodeId node, uint64_t from, uint64_t to, size_t first, size_t count,
                                    int64_t after_ms = 0) {
    wire::SliceReport r{node, 1000, 1u << 30, {}, 0, ""};
    wire::SliceWindow w{node, 0, 1, from, to, {}};
    auto all = model_units(d.config().model);
    for (size_t i = first; i < first + count && i < all.size(); ++i)
      w.units.push_back({uint8_t(all[i].kind), int32_t(all[i].layer), int32_t(all[i].expert)});
    r.windows.push_back(w);
    return on(in::Slices{r}, after_ms);
  }
  const std::vector<Action>& lose(NodeId node, const std::string& cause = "connection closed") {
    return on(in::Lost{node, std::nullopt, cause});
  }
  const std::vector<Action>& timer(Timer t, int64_t after_ms = 0) { return on(in::TimerFired{t}, after_ms); }
  // The planner's answer to the last DecidePlan: a dealt plan for its workers.
  const std::vector<Action>& decide() {
    REQUIRE(asked);
    return on(in::Decided{asked->decision, dealt_plan(asked->workers, ++versions)});
  }
  const std::vector<Action>& ready(Participant p, uint64_t plan, bool ok = true, const std::string& detail = "",
                                   bool snapshot_unreadable = false) {
    wire::PlanReady r{p.node, p.index, plan, ok, detail, 1, 0.5, 0.5};
    r.snapshot_unreadable = snapshot_unreadable;
    return on(in::Ready{r});
  }
  const std::vector<Action>& vote(Participant p, uint64_t step, bool ok = true, const std::string& detail = "") {
    wire::StepVote v;
    v.node_id = p.node, v.index = p.index, v.epoch = d.steps().epoch(), v.step = step, v.ok = ok, v.detail = detail;
    v.ce_sum = 2.0 * 64, v.tokens = 64, v.lr = 1e-3, v.grad_norm = 1;
    v.loads.assign(2 * 4, 8);
    return on(in::Vote{v});
  }

  // Every rank of the pending plan answers ready.
  void all_ready() {
    auto plan = d.pending_plan();
    REQUIRE(plan);
    auto ranks = pending_ranks();
    for (const auto& r : ranks) ready(r, *plan);
  }
  // Every participant of the step in flight votes yes; then the driver's next turn (Timer::soon).
  void commit_step() {
    REQUIRE(d.steps().in_flight());
    uint64_t step = d.steps().next_step();
    std::vector<Participant> who(d.steps().participants().begin(), d.steps().participants().end());
    for (const auto& p : who) vote(p, step);
    REQUIRE(d.steps().committed() == step + 1);
    timer(Timer::soon);
  }
  // From nothing to step 0 in flight on `ready`.
  void start(const std::vector<Participant>& ready_workers) {
    membership(ready_workers);
    if (!asked) timer(Timer::gate, 5000);
    REQUIRE(asked);
    decide();
    all_ready();
    REQUIRE(d.phase() == Phase::running);
    REQUIRE(d.steps().in_flight());
  }

  // The ranks of the pending plan, from its PlanUpdate.
  std::vector<Participant> pending_ranks() const {
    for (auto it = history.rbegin(); it != history.rend(); ++it)
      if (auto* s = std::get_if<act::Send>(&*it))
        if (auto* u = std::get_if<wire::PlanUpdate>(&s->msg); u && u->plan.version == d.pending_plan()) {
          std::vector<Participant> r;
          for (const auto& x : u->ranks) r.push_back({x.node, x.index});
          return r;
        }
    FAIL("no PlanUpdate for the pending plan");
    return {};
  }

  // Searching the actions of the last event.
  template <class A>
  std::vector<A> all() const {
    return of_kind<A>(out);
  }
  // Searching every action since the harness began.
  template <class A>
  std::vector<A> ever() const {
    return of_kind<A>(history);
  }
  template <class M>
  std::vector<std::pair<act::Send, M>> sent() const {
    std::vector<std::pair<act::Send, M>> r;
    for (const auto& s : all<act::Send>())
      if (auto* m = std::get_if<M>(&s.msg)) r.push_back({s, *m});
    return r;
  }
  bool noted(const std::string& kind) const {
    for (const auto& n : all<act::Note>())
      if (n.kind == kind) return true;
    return false;
  }
  std::string note_detail(const std::string& kind) const {
    for (const auto& n : all<act::Note>())
      if (n.kind == kind) return n.detail;
    return "";
  }
  bool armed(Timer t) const {
    for (const auto& a : all<act::ArmTimer>())
      if (a.timer == t) return true;
    return false;
  }
  // The last event's arming of `t`, in ms (-1: not armed).
  int64_t armed_ms(Timer t) const {
    int64_t ms = -1;
    for (const auto& a : all<act::ArmTimer>())
      if (a.timer == t) ms = int64_t(a.ms);
    return ms;
  }

  Driver d;
  int64_t now_ns = 1'000'000'000;
  Epoch epoch = 0;
  uint64_t versions = 0;
  std::vector<Action> out;      // the last event's actions
  std::vector<Action> history;  // every action so far
  std::optional<act::DecidePlan> asked;

 private:
  static std::vector<Participant> sorted(std::vector<Participant> v) {
    std::sort(v.begin(), v.end());
    return v;
  }
};

}  // namespace sal::job::test

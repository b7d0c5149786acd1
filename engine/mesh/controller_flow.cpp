// controller_flow.cpp — the controller's decisions over time (see controller.h): driving and
// committing steps, recomputing the plan when membership changes, operator actions (kill, drain,
// stop) and the graceful shutdown.
#include <signal.h>
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/paths.h"
#include "mesh/controller.h"
#include "mesh/planner.h"

namespace sal::mesh {

// How long a graceful stop waits for agents to say goodbye before giving up on them.
constexpr int64_t kStopGraceMs = 3000;
// Joins and departures that arrive together (a node and its workers, a run starting) are
// batched into one plan by this short delay.
constexpr uint64_t kPlanDebounceMs = 20;

// ---------- steps ----------

void Controller::step_outcome(StepCoordinator::Outcome o) {
  using O = StepCoordinator::Outcome;
  if (o == O::committed) {
    StepId done = steps_.committed() - 1;
    broadcast(wire::StepCommit{steps_.epoch(), done});
    int64_t now = mono_ns();
    if (rate_window_ns_ == 0) {
      rate_window_ns_ = now;
      rate_window_steps_ = steps_.committed();
    } else if (now - rate_window_ns_ >= 500'000'000) {
      step_rate_ = double(steps_.committed() - rate_window_steps_) * 1e9 / double(now - rate_window_ns_);
      rate_window_ns_ = now;
      rate_window_steps_ = steps_.committed();
    }
    if (opts_.max_steps > 0 && int64_t(steps_.committed()) >= opts_.max_steps) {
      events_.add("steps_done", kNoNode, membership_.epoch(),
                  std::to_string(steps_.committed()) + " steps committed");
      request_stop("completed " + std::to_string(steps_.committed()) + " steps");
      return;
    }
    maybe_begin_step();
  } else if (o == O::aborted) {
    events_.add("step_aborted", kNoNode, membership_.epoch(),
                "step " + std::to_string(steps_.next_step()) + ": " + steps_.last_abort_reason());
    spdlog::warn("step {} aborted: {}", steps_.next_step(), steps_.last_abort_reason());
    broadcast(wire::StepAbort{steps_.epoch(), steps_.next_step(), steps_.last_abort_reason()});
  }
}

void Controller::maybe_begin_step() {
  if (steps_.in_flight() || stopping_) return;
  if (opts_.max_steps <= 0 || int64_t(steps_.committed()) >= opts_.max_steps) return;
  std::vector<Participant> who;
  for (const auto& [id, n] : membership_.nodes()) {
    if (!n.usable()) continue;
    for (const auto& w : n.workers)
      if (!w.exited && w.state == wire::WorkerState::ready) who.push_back({id, w.index});
  }
  if (who.empty()) return;
  steps_.begin(membership_.epoch(), who);
  wire::StepBegin msg{membership_.epoch(), steps_.next_step()};
  std::set<NodeId> nodes;
  for (const auto& p : who) nodes.insert(p.node);
  for (NodeId id : nodes) send_to(membership_.find(id)->routing_id, msg);
}

// ---------- operator actions ----------

Status Controller::kill_node(NodeId id, const std::string& who) {
  Node* n = membership_.find(id);
  if (!n) return fail("no node ", id);
  if (!n->live() && n->state != NodeState::draining) return fail("node ", id, " is already ", state_name(n->state));
  events_.add("kill_requested", id, membership_.epoch(), "by " + who);
  send_to(n->routing_id, wire::Command{wire::Verb::kill, "killed by " + who});
  // A frozen agent cannot obey; on this host we can make sure (the drill's "kill" is SIGKILL).
  if (n->pid > 0 && n->host == hostname() && n->addr.rfind("127.", 0) == 0) ::kill(pid_t(n->pid), SIGKILL);
  return {};
}

Status Controller::drain_node(NodeId id, const std::string& who) {
  Node* n = membership_.find(id);
  if (!n) return fail("no node ", id);
  if (!n->live()) return fail("node ", id, " is ", state_name(n->state), ", not live");
  membership_.drain(id, "drain requested by " + who, mono_ns());
  send_to(n->routing_id, wire::Command{wire::Verb::drain, "drained by " + who});
  changed();
  return {};
}

void Controller::request_stop(const std::string& why) {
  if (stopping_) return;
  events_.add("stop_requested", kNoNode, membership_.epoch(), why);
  if (on_stop_requested) {
    on_stop_requested(why);
  } else {
    shutdown(why, [] {});
  }
}

void Controller::shutdown(const std::string& reason, std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  membership_.set_stopping();
  stop_done_ = std::move(done);
  spdlog::info("stopping job: {}", reason);
  step_outcome(steps_.abort("job stopping: " + reason));
  broadcast(wire::Command{wire::Verb::stop, reason});
  stop_timer_.start(kStopGraceMs, 0, [this] {
    for (const auto& [id, n] : membership_.nodes())
      if (n.live() || n.state == NodeState::draining)
        spdlog::warn("node {} did not leave within {} ms of the stop", id, kStopGraceMs);
    if (stop_done_) std::exchange(stop_done_, nullptr)();
  });
  check_shutdown_done();
}

void Controller::check_shutdown_done() {
  if (!stopping_ || !stop_done_) return;
  for (const auto& [id, n] : membership_.nodes())
    if (n.live() || n.state == NodeState::draining) return;
  stop_timer_.stop();
  std::exchange(stop_done_, nullptr)();
}

void Controller::changed() {
  if (membership_.epoch() != planned_epoch_ && !stopping_) plan_soon("membership changed");
  if (on_change) on_change();
}

void Controller::plan_soon(const std::string& why) {
  if (plan_reason_.empty()) plan_timer_.start(kPlanDebounceMs, 0, [this] { replan(); });
  plan_reason_ = why;
}

void Controller::replan() {
  std::string why = std::exchange(plan_reason_, "");
  planned_epoch_ = membership_.epoch();
  auto workers = uint32_t(membership_.ready_workers());
  if (workers == 0 || stopping_) return;
  auto r = planner_->replan(workers, membership_.epoch());
  if (!r) {
    events_.add("plan_failed", kNoNode, membership_.epoch(), why + ": " + r.error().message());
    spdlog::warn("no plan for {} workers: {}", workers, r.error().message());
    return;
  }
  events_.add("plan", kNoNode, membership_.epoch(),
              "plan " + std::to_string(r->number) + " for " + std::to_string(workers) + " workers (" + why +
                  "): allocation by " + r->allocation_by + ", placement by " + r->placement_by +
                  (r->note.empty() ? "" : "; " + r->note));
}

}  // namespace sal::mesh

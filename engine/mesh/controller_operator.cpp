// controller_operator.cpp — the controller's operator actions (kill, drain, freeze, faults, stop) and
// the graceful shutdown (see controller.h). Steps and plans are the job driver's (job/driver.h).
#include <signal.h>
#include <algorithm>
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/paths.h"
#include "ckpt/format.h"
#include "mesh/controller.h"
#include "wire/unit_refs.h"
#include "mesh/cpu_share.h"

namespace sal::mesh {

namespace {

bool on_this_host(const Node& n) { return n.pid > 0 && n.host == hostname() && n.addr.rfind("127.", 0) == 0; }

// A live node of this host that a drill may act on by its processes, or why not ("be frozen").
Result<Node*> local_live_node(Membership& m, NodeId id, const char* can_be) {
  Node* n = m.find(id);
  if (!n) return fail("no node ", id);
  if (!n->live()) return fail("node ", id, " is ", state_name(n->state), ", not live");
  if (!on_this_host(*n)) return fail("node ", id, " runs on ", n->host, ": only a node on this host can ", can_be);
  return n;
}

std::vector<pid_t> running_worker_pids(const Node& n) {
  std::vector<pid_t> pids;
  for (const auto& w : n.workers)
    if (w.pid > 0 && !w.exited) pids.push_back(pid_t(w.pid));
  return pids;
}

}  // namespace


// How long a graceful stop waits for agents to say goodbye before giving up on them.
constexpr int64_t kStopGraceMs = 3000;

// ---------- operator actions ----------

Status Controller::kill_node(NodeId id, const std::string& who) {
  Node* n = membership_.find(id);
  if (!n) return fail("no node ", id);
  if (!n->live() && n->state != NodeState::draining) return fail("node ", id, " is already ", state_name(n->state));
  events_.add("kill_requested", id, membership_.epoch(), "by " + who);
  send_to(n->routing_id, wire::Command{wire::Verb::kill, "killed by " + who});
  // A frozen agent cannot obey; on this host we can make sure (the drill's "kill" is SIGKILL).
  if (on_this_host(*n)) ::kill(pid_t(n->pid), SIGKILL);
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

// Runs `undo` once, `ms` from now, on the loop (the end of a freeze or a slowdown); the timer lives
// until then.
void Controller::after_ms(uint64_t ms, std::function<void()> undo) {
  auto timer = std::make_shared<Timer>(loop_);
  thaw_timers_.push_back(timer);
  timer->start(ms, 0, [this, undo = std::move(undo), timer] {
    undo();
    thaw_timers_.erase(std::remove(thaw_timers_.begin(), thaw_timers_.end(), timer), thaw_timers_.end());
  });
}

Status Controller::freeze_node(NodeId id, uint64_t ms, const std::string& who) {
  auto n = local_live_node(membership_, id, "be frozen");
  if (!n) return n.error();
  std::vector<pid_t> pids{pid_t((*n)->pid)};
  for (pid_t w : running_worker_pids(**n)) pids.push_back(w);
  for (pid_t p : pids) ::kill(p, SIGSTOP);
  events_.add("node_frozen", id, membership_.epoch(),
              "SIGSTOP to its agent and " + std::to_string(pids.size() - 1) + " workers for " + std::to_string(ms) +
                  " ms, by " + who);
  after_ms(ms, [this, id, pids] {
    for (pid_t p : pids) ::kill(p, SIGCONT);
    events_.add("node_thawed", id, membership_.epoch(), "SIGCONT after the freeze");
  });
  return {};
}

Status Controller::crash_workers(NodeId id, const std::string& who) {
  auto n = local_live_node(membership_, id, "have its workers crashed");
  if (!n) return n.error();
  const std::vector<pid_t> pids = running_worker_pids(**n);
  if (pids.empty()) return fail("node ", id, " has no worker running");
  for (pid_t p : pids) ::kill(p, SIGKILL);
  events_.add("workers_crashed", id, membership_.epoch(),
              "SIGKILL to its " + std::to_string(pids.size()) + (pids.size() == 1 ? " worker" : " workers") +
                  " (not its agent), by " + who);
  return {};
}

Status Controller::slow_node(NodeId id, double factor, uint64_t ms, const std::string& who) {
  auto found = local_live_node(membership_, id, "be slowed");
  if (!found) return found.error();
  const Node* n = *found;
  std::vector<std::pair<std::string, int64_t>> groups;  // each worker's group and its quota now
  for (const auto& w : n->workers) {
    if (w.pid == 0 || w.exited) continue;
    auto g = confined_group(pid_t(w.pid));
    if (!g) return g.error().with_context("slowing worker " + participant_name({id, w.index}));
    auto q = group_quota(*g);
    if (!q) return q.error();
    if (*q <= 0) return fail("worker ", participant_name({id, w.index}), "'s group ", *g, " has no CPU quota to cut");
    groups.push_back({*g, *q});
  }
  for (const auto& [g, q] : groups) SAL_TRY(set_group_quota(g, int64_t(double(q) * factor)));
  events_.add("node_slowed", id, membership_.epoch(),
              std::to_string(groups.size()) + " workers at " + std::to_string(int(factor * 100 + 0.5)) +
                  " % of their CPU share for " + std::to_string(ms) + " ms, by " + who + " (at step " +
                  std::to_string(steps().committed()) + ")");
  after_ms(ms, [this, id, groups] {
    for (const auto& [g, q] : groups)
      if (auto s = set_group_quota(g, q); !s) spdlog::warn("giving node {} its CPU share back: {}", id, s.error().message());
    events_.add("node_speed_restored", id, membership_.epoch(),
                "its workers' CPU share back after the slowdown (at step " + std::to_string(steps().committed()) + ")");
  });
  return {};
}

Status Controller::arm_fault(NodeId id, uint32_t index, wire::FaultPoint point, std::optional<uint64_t> step,
                             const std::string& who) {
  Node* n = membership_.find(id);
  if (!n) return fail("no node ", id);
  if (!n->live()) return fail("node ", id, " is ", state_name(n->state), ", not live");
  send_to(n->routing_id, wire::FaultArm{index, point, step.value_or(0), !step, who});
  return {};
}

Status Controller::arm_corruption(NodeId id, const UnitId& unit, uint32_t bits, uint64_t step, const std::string& who) {
  if (!job().faults.inject)
    return fail("the job ", job().file, " does not allow fault injection (faults.inject is false)");
  if (unit_index(job::model_shape(job().model), unit) < 0) return fail("the job's model has no ", unit.name());
  Node* n = membership_.find(id);
  if (!n) return fail("no node ", id);
  if (!n->live()) return fail("node ", id, " is ", state_name(n->state), ", not live");
  for (const auto& w : n->workers) {
    wire::FaultArm f{w.index, wire::FaultPoint::corrupt, step, false, who};
    f.unit = wire::unit_ref(unit);
    f.bits = bits;
    send_to(n->routing_id, f);
  }
  return {};
}

void Controller::request_stop(const std::string& why) {
  if (stopping_) return;
  if (finishing_) return stop_now(why);  // asked again while the final checkpoint is written
  finishing_ = true;
  spdlog::info("stop asked for ({}): the step in flight is aborted and the final checkpoint written first", why);
  feed(job::in::Stop{why, true});  // the driver answers StopJob: after the save, or at once
}

void Controller::stop_now(const std::string& why) {
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
  feed(job::in::Stop{reason});
  // a stopped job is over: a later `--resume` has nothing to resume (a killed controller writes nothing)
  // (synced here, on the loop: the job is stopping, and a sync of the driver's may be in flight)
  if (journal_ && !journal_->state().ended)
    if (auto s = journal_->append(job::rec::End{"stopped: " + reason}, true); !s)
      spdlog::error("journal: {}", s.error().message());
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
  remove_incomplete_snapshots();
  std::exchange(stop_done_, nullptr)();
}

// Every node has left: no worker writes a snapshot any more, and the half-written ones go.
void Controller::remove_incomplete_snapshots() {
  if (opts_.run_dir.empty()) return;
  for (const auto& dir : ckpt::remove_incomplete_snapshots(opts_.run_dir + "/snapshots"))
    events_.add("snapshot_removed", kNoNode, membership_.epoch(), dir + ": incomplete (a rank writing it left, or the job stopped)");
}

}  // namespace sal::mesh

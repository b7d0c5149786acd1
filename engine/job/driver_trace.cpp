// driver_trace.cpp — the job driver's events and actions in one line each, for the controller's
// debug trace (driver_io.h: describe): "vote 1.0 step 12 yes", "send plan_update to 4 nodes".
#include <string>

#include "core/overloaded.h"
#include "job/driver_io.h"

namespace sal::job {

const char* timer_name(Timer t) {
  switch (t) {
    case Timer::gate: return "gate";
    case Timer::plan: return "plan";
    case Timer::retry: return "retry";
    case Timer::join: return "join";
    case Timer::soon: return "soon";
    case Timer::capacity: return "capacity";
    case Timer::count_: break;
  }
  return "?";
}

namespace {

std::string who(uint32_t node, uint32_t index) { return std::to_string(node) + "." + std::to_string(index); }

}  // namespace

std::string describe(const Event& e) {
  return std::visit(
      Overloaded{
          [](const in::Membership& m) {
            return "membership epoch " + std::to_string(m.view.epoch) + ", " + std::to_string(m.view.ready.size()) +
                   " ready";
          },
          [](const in::Lost& l) { return "lost node " + std::to_string(l.node) + ": " + l.cause; },
          [](const in::Vote& v) {
            return "vote " + who(v.vote.node_id, v.vote.index) + " step " + std::to_string(v.vote.step) +
                   (v.vote.ok ? " yes" : " no: " + v.vote.detail);
          },
          [](const in::Ready& r) {
            return "ready " + who(r.ready.node_id, r.ready.index) + " plan " + std::to_string(r.ready.plan) +
                   (r.ready.ok ? "" : " failed: " + r.ready.detail);
          },
          [](const in::Saved& s) {
            return std::string(s.done.snapshot ? "snapshot" : "checkpoint") + " saved by " +
                   who(s.done.node_id, s.done.index) + " step " + std::to_string(s.done.step) +
                   (s.done.ok ? "" : " failed: " + s.done.detail);
          },
          [](const in::Decided& d) {
            return "plan decided (" + std::to_string(d.decision) + ")" +
                   (d.record ? "" : ": " + d.record.error().message());
          },
          [](const in::TimerFired& t) { return std::string("timer ") + timer_name(t.timer); },
          [](const in::HealthDecided& d) {
            return "health decided (" + std::to_string(d.decision) + ") by " + d.decided_by + ": " + d.proposal.note;
          },
          [](const in::PatchDecided& d) {
            return "patch decided (" + std::to_string(d.decision) + ")" + (d.stacks ? "" : ": " + d.stacks.error().message());
          },
          [](const in::PlanRequest& r) { return "plan request: " + r.why; },
          [](const in::Stop& s) { return std::string(s.save ? "stop (save first): " : "stop: ") + s.why; },
          [](const in::Slices& s) {
            std::string out = "slices of node " + std::to_string(s.report.node_id) + ": " +
                              std::to_string(s.report.bytes) + " bytes, complete windows";
            for (const auto& w : s.report.windows)
              out += " " + who(w.writer_node, w.writer_index) + "@" + std::to_string(w.from) + ".." + std::to_string(w.to) +
                     "(" + std::to_string(w.units.size()) + " units, plan " + std::to_string(w.plan) + ")";
            return out + (s.report.windows.empty() ? " none" : "");
          },
      },
      e);
}

std::string describe(const Action& a) {
  return std::visit(
      Overloaded{
          [](const act::Send& s) {
            auto what = std::visit([](const auto& m) { return wire::type_name(m.kType); }, s.msg);
            return "send " + std::string(what) + (s.all ? " to all" : " to " + std::to_string(s.to.size()) + " nodes");
          },
          [](const act::DecidePlan& d) { return "decide a plan for " + std::to_string(d.workers) + " workers"; },
          [](const act::DecidePatch& d) { return "decide a patch (" + std::to_string(d.decision) + ")"; },
          [](const act::DecideHealth& d) { return "decide the workers' shares (" + std::to_string(d.decision) + ")"; },
          [](const act::Drain& d) { return "drain node " + std::to_string(d.node); },
          [](const act::ArmTimer& t) { return std::string("arm ") + timer_name(t.timer) + " " + std::to_string(t.ms) + " ms"; },
          [](const act::CancelTimer& t) { return std::string("cancel ") + timer_name(t.timer); },
          [](const act::Note& n) { return "note " + n.kind; },
          [](const act::Phase& p) { return "phase " + (p.name.empty() ? std::string("closed") : p.name); },
          [](const act::StepDone& s) { return "step done " + std::to_string(s.record.step); },
          [](const act::PlanInForce& p) { return "plan in force " + std::to_string(p.plan.number()); },
          [](const act::RecoveryDone&) { return std::string("recovery done"); },
          [](const act::StepsLost& s) { return "steps lost " + std::to_string(s.steps); },
          [](const act::Restored&) { return std::string("restored"); },
          [](const act::EraseKeys& k) {
            return std::string(k.closed ? "close" : "erase") + " the store keys of plan " + std::to_string(k.plan) +
                   (k.under.empty() ? "" : " under " + k.under);
          },
          [](const act::SnapshotComplete& s) { return "snapshot complete " + s.snapshot.dir; },
          [](const act::CheckpointComplete& c) { return "checkpoint complete " + c.dir; },
          [](const act::SnapshotDrop& s) { return "drop snapshot " + s.dir; },
          [](const act::Committed& c) { return "committed " + std::to_string(c.step); },
          [](const act::StopJob& s) { return "stop the job: " + s.why; },
          [](const act::Journal& j) { return std::string("journal") + (j.sync ? " (sync)" : ""); },
      },
      a);
}

}  // namespace sal::job

// driver_table.cpp — the job driver's transition table: for each phase, which events it handles
// and with which handler (driver.cpp). An event a phase does not list is ignored there; "any" rows
// apply in every phase. The handlers move between phases as driver.h describes.
#include <array>
#include <string>

#include "core/overloaded.h"

#include "job/driver.h"

namespace sal::job {
namespace {

enum class When : uint8_t { gathering, planning, running, saving, done, failed, any };

// The event kinds, as their index in job::Event, and the timers as their own kinds.
enum class On : uint8_t { membership, lost, vote, ready, saved, decided, timer, request, stop, slices, patch_decided };
static_assert(size_t(On::patch_decided) + 1 == std::variant_size_v<Event>, "one kind per event");

struct Row {
  When when;
  On on;
  std::optional<Timer> timer;  // for On::timer: which one (nullopt: any)
  Driver::Handler handler;
};

bool matches(const Row& r, Phase p, On on, std::optional<Timer> timer) {
  if (r.on != on) return false;
  if (r.when != When::any && r.when != When(uint8_t(p))) return false;
  return !r.timer || r.timer == timer;
}

}  // namespace

Driver::Handler Driver::handler(Phase p, size_t event_kind, std::optional<Timer> timer) {
  // clang-format off
  static const Row kTable[] = {
    // phase             event            timer            handler
    {When::gathering,    On::membership,  {},              &Driver::on_membership},  // enough workers? plan
    {When::gathering,    On::timer,       Timer::gate,     &Driver::on_timer},       // join window over: plan
    {When::gathering,    On::timer,       Timer::soon,     &Driver::on_membership},

    {When::planning,     On::membership,  {},              &Driver::on_membership},  // a pending rank left: plan failed
    {When::planning,     On::decided,     {},              &Driver::on_decided},     // map the plan, send it
    {When::planning,     On::ready,       {},              &Driver::on_ready},       // every rank ready: running
    {When::planning,     On::timer,       Timer::plan,     &Driver::on_timer},       // too slow: plan failed
    {When::planning,     On::timer,       Timer::retry,    &Driver::on_timer},       // plan again
    {When::planning,     On::timer,       Timer::soon,     &Driver::on_membership},

    {When::running,      On::membership,  {},              &Driver::on_membership},  // between steps: boundary
    {When::running,      On::vote,        {},              &Driver::on_vote},        // all yes: commit; a no: abort
    {When::running,      On::lost,        {},              &Driver::on_lost},        // a participant gone: patch or abort
    {When::running,      On::patch_decided, {},            &Driver::on_patch_decided},  // send the patch, or abort
    {When::running,      On::timer,       Timer::join,     &Driver::on_timer},       // join batch over: re-plan
    {When::running,      On::timer,       Timer::soon,     &Driver::on_membership},  // an operator's request

    {When::saving,       On::membership,  {},              &Driver::on_membership},  // a saver left: job failed
    {When::saving,       On::timer,       Timer::plan,     &Driver::on_timer},       // too slow: job failed

    {When::any,          On::saved,       {},              &Driver::on_saved},       // a snapshot, or (saving) all saved: done
    {When::any,          On::request,     {},              &Driver::on_request},     // at the next boundary
    {When::any,          On::stop,        {},              &Driver::on_stop},
    {When::any,          On::slices,      {},              &Driver::on_slices},      // what an agent holds (the sparse rung)
  };
  // clang-format on
  for (const Row& r : kTable)
    if (matches(r, p, On(event_kind), timer)) return r.handler;
  return nullptr;
}

// ---- the debug trace's lines ----

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
          [](const act::ArmTimer& t) { return std::string("arm ") + timer_name(t.timer) + " " + std::to_string(t.ms) + " ms"; },
          [](const act::CancelTimer& t) { return std::string("cancel ") + timer_name(t.timer); },
          [](const act::Note& n) { return "note " + n.kind; },
          [](const act::Phase& p) { return "phase " + (p.name.empty() ? std::string("closed") : p.name); },
          [](const act::StepDone& s) { return "step done " + std::to_string(s.record.step); },
          [](const act::PlanInForce& p) { return "plan in force " + std::to_string(p.plan.number()); },
          [](const act::RecoveryDone&) { return std::string("recovery done"); },
          [](const act::StepsLost& s) { return "steps lost " + std::to_string(s.steps); },
          [](const act::Restored&) { return std::string("restored"); },
          [](const act::EraseKeys& k) { return "erase the store keys of plan " + std::to_string(k.plan); },
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

// driver_table.cpp — the job driver's transition table (driver.h): for each phase
// (driver_phases.h) and kind of event, the handler that runs and the phases it may move to. An
// event a phase does not list is ignored there; "any" rows apply in every phase. Handlers return
// the next phase, or none to stay; the dispatcher below (handle) is the one place the phase
// changes, and it holds every handler to its row's "to" column.
#include <string>

#include "job/driver.h"

namespace sal::job {
namespace table {

// The phases as their index in State, and as a set of them (the "to" column).
enum S : uint16_t { gathering, reconciling, deciding, switching, retrying, running, saving, done, failed, any };
static_assert(size_t(failed) + 1 == std::variant_size_v<State>, "one name per phase");
using To = uint16_t;
constexpr To to(std::initializer_list<S> phases) {
  To set = 0;
  for (S p : phases) set = To(set | (1u << p));
  return set;
}

// The event kinds, as their index in job::Event.
enum class On : uint8_t { membership, lost, vote, ready, saved, decided, timer, request, stop, slices, patch_decided,
                          health_decided };
static_assert(size_t(On::health_decided) + 1 == std::variant_size_v<Event>, "one kind per event");

// After a plan comes into force the first boundary may begin a step, plan again (at once, or once
// the windows' reports have settled after a loss) or end the job.
constexpr To kFromRunning = to({running, deciding, retrying, saving, done});
// An aborted step waits for its cause to be seen, or plans at once when it already is.
constexpr To kAfterAbort = to({retrying, deciding, gathering, failed});

}  // namespace table

using namespace table;

struct Driver::Row {
  S from;
  On on;
  std::optional<Timer> timer;  // for On::timer: which one (nullopt: any)
  Handler handler;
  To to;                       // the phases it may move to (besides staying)
};

const Driver::Row* Driver::row(size_t state, size_t event_kind, std::optional<Timer> timer) {
  using T = Timer;
  // clang-format off
  static const Row kTable[] = {
    // from        event              timer      handler                     to
    {gathering,    On::membership,    {},        &Driver::on_gather,         to({deciding, gathering, failed})},  // enough workers? plan
    {gathering,    On::timer,         T::gate,   &Driver::on_gather,         to({deciding, gathering})},          // join window over: plan
    {gathering,    On::timer,         T::soon,   &Driver::on_gather,         to({deciding, gathering, failed})},
    {gathering,    On::timer,         T::capacity, &Driver::on_capacity_timeout, to({failed})},           // no plan for too long

    {reconciling,  On::membership,    {},        &Driver::on_reconcile,      to({deciding, gathering})},  // the plan's ranks back? plan
    {reconciling,  On::timer,         T::gate,   &Driver::on_reconcile,      to({deciding, gathering})},
    {reconciling,  On::timer,         T::soon,   &Driver::on_reconcile,      to({deciding, gathering})},

    {deciding,     On::membership,    {},        &Driver::on_view,           0},                          // checked when decided
    {deciding,     On::timer,         T::capacity, &Driver::on_capacity_timeout, to({failed})},
    {deciding,     On::decided,       {},        &Driver::on_decided,                                     // send the plan, or restore
                                                 To(to({deciding, switching, gathering, failed}) | kFromRunning)},

    {switching,    On::membership,    {},        &Driver::on_switch_view,    to({deciding, gathering, retrying})},  // a pending rank left
    {switching,    On::timer,         T::soon,   &Driver::on_switch_view,    to({deciding, gathering, retrying})},
    {switching,    On::ready,         {},        &Driver::on_ready,                                       // every rank ready: in force
                                                 To(to({retrying, failed}) | kFromRunning)},
    {switching,    On::timer,         T::plan,   &Driver::on_switch_timeout, to({retrying, failed})},     // too slow: plan failed

    {retrying,     On::membership,    {},        &Driver::on_retry_view,     to({deciding, gathering, failed})},  // the abort's cause seen
    {retrying,     On::timer,         T::soon,   &Driver::on_retry_view,     to({deciding, gathering, failed})},
    {retrying,     On::timer,         T::retry,  &Driver::on_retry,          to({deciding, gathering, failed})},  // plan again
    {retrying,     On::slices,        {},        &Driver::on_settling_slices, to({deciding, gathering, failed})}, // the newest came

    {running,      On::membership,    {},        &Driver::on_boundary,       kFromRunning},               // between steps: boundary
    {running,      On::timer,         T::soon,   &Driver::on_boundary,       kFromRunning},               // the next step; a request
    {running,      On::timer,         T::join,   &Driver::on_join_batch,     kFromRunning},               // join batch over: re-plan
    {running,      On::vote,          {},        &Driver::on_vote,           kAfterAbort},                // all yes: commit; a no: abort
    {running,      On::lost,          {},        &Driver::on_lost,           kAfterAbort},                // a participant gone: patch or abort
    {running,      On::patch_decided, {},        &Driver::on_patch_decided,  kAfterAbort},                // send the patch, or abort

    {saving,       On::membership,    {},        &Driver::on_saver_view,     to({saving, done, failed})}, // a saver left: again
    {saving,       On::timer,         T::plan,   &Driver::on_save_timeout,   to({done, failed})},         // too slow

    {any,          On::saved,         {},        &Driver::on_saved,          to({done, failed})},         // a snapshot; (saving) all saved
    {any,          On::request,       {},        &Driver::on_request,        0},                          // at the next boundary
    {any,          On::stop,          {},        &Driver::on_stop,           to({saving, done})},
    {any,          On::slices,        {},        &Driver::on_slices,         0},                          // what an agent holds
    {any,          On::health_decided, {},       &Driver::on_health_decided, 0},                          // the workers' shares
  };
  // clang-format on
  for (const Row& r : kTable) {
    if (r.on != On(event_kind) || (r.from != any && r.from != S(state))) continue;
    if (!r.timer || r.timer == timer) return &r;
  }
  return nullptr;
}

Driver::Handler Driver::handler(Phase p, size_t event_kind, std::optional<Timer> timer) {
  for (size_t s = 0; s < std::variant_size_v<State>; ++s)
    if (coarse_phase(s) == p)
      if (const Row* r = row(s, event_kind, timer)) return r->handler;
  return nullptr;
}

std::vector<Action> Driver::handle(const Input& in) {
  out_.clear();
  now_ns_ = in.now_ns;
  if (last_commit_ns_ == 0) windows_made_now();
  if (auto* m = std::get_if<in::Membership>(&in.what)) view_ = m->view;
  std::optional<Timer> timer;
  if (auto* t = std::get_if<in::TimerFired>(&in.what)) timer = t->timer;
  if (const Row* r = row(state_.index(), in.what.index(), timer))
    if (Next next = (this->*r->handler)(in.what)) set_phase(r->to, std::move(*next));
  return std::move(out_);
}

// A handler that moves somewhere its row does not list is a bug in the driver: said, and the move
// taken (the tests fail on the note).
void Driver::check_transition(uint16_t allowed, const State& next) {
  if (allowed & (1u << next.index())) return;
  note("driver_error", std::string("the transition table does not list ") + state_name(state_) + " -> " +
                           state_name(next) + "; taken anyway", act::Level::error);
}

// The run record hears of a phase when the coarse phase changes, and of every new plan decision
// (with its reason), before the actions taken on the way (the new phase began with the event).
void Driver::record_phase(const State& next) {
  const Phase before = coarse(state_), after = coarse(next);
  const auto* deciding = std::get_if<phase::Deciding>(&next);
  if (before == after && !deciding) return;
  static constexpr const char* kRecordName[] = {"wait", "reconfigure", "compute", "save", "", ""};
  out_.insert(out_.begin(), act::Phase{kRecordName[size_t(after)], deciding ? deciding->why : ""});
}

}  // namespace sal::job

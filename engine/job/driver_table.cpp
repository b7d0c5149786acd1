// driver_table.cpp — the job driver's transition table: for each phase, which events it handles
// and with which handler (driver.cpp). An event a phase does not list is ignored there; "any" rows
// apply in every phase. The handlers move between phases as driver.h describes.
#include <array>

#include "job/driver.h"

namespace sal::job {
namespace {

enum class When : uint8_t { gathering, planning, running, saving, done, failed, any };

// The event kinds, as their index in job::Event, and the timers as their own kinds.
enum class On : uint8_t { membership, lost, vote, ready, saved, decided, timer, request, stop };
static_assert(size_t(On::stop) + 1 == std::variant_size_v<Event>, "one kind per event");

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
    {When::running,      On::lost,        {},              &Driver::on_lost},        // a participant gone: abort
    {When::running,      On::timer,       Timer::join,     &Driver::on_timer},       // join batch over: re-plan
    {When::running,      On::timer,       Timer::soon,     &Driver::on_membership},  // an operator's request

    {When::saving,       On::membership,  {},              &Driver::on_membership},  // a saver left: job failed
    {When::saving,       On::timer,       Timer::plan,     &Driver::on_timer},       // too slow: job failed

    {When::any,          On::saved,       {},              &Driver::on_saved},       // a snapshot, or (saving) all saved: done
    {When::any,          On::request,     {},              &Driver::on_request},     // at the next boundary
    {When::any,          On::stop,        {},              &Driver::on_stop},
  };
  // clang-format on
  for (const Row& r : kTable)
    if (matches(r, p, On(event_kind), timer)) return r.handler;
  return nullptr;
}

}  // namespace sal::job

// eval_pacing.h — when a REPL chunk's evaluation thread computes in the CPUs' idle time only, and when
// it takes the normal class back: the rule, as pure logic (console/repl_server.cpp looks at the
// running chunk every kEvalPaceCheckMs and moves its thread: core/lifetime.h, run_in_idle_time).
//
// A chunk that has computed kEvalForegroundCpuMs of CPU time of its own goes into idle time: beside
// workers that wake many times a step, a nice value weighs the chunk's share but not how long a woken
// worker waits for the chunk's slice to end, and a runaway chunk at nice 10 cut the steps/s to 0.48
// of the rate before it in a CI run (in idle time after 20 ms, 0.57 at worst in 24 readings). It is
// the chunk's CPU time that counts, not the wall clock: a query waiting for a loaded loop, or for a
// CPU on a machine with none idle, computes nothing meanwhile, and judged on the wall clock it went
// into idle time after 20 ms — on a machine with no idle CPU it then did not run again until its
// budget (seen beside other test programs: `return job.events(500)` "stopped after 1232 ms while
// converting the result", a result of a few dozen events). At its budget a chunk in idle time takes
// the normal class back, so that it sees the budget passed and stops at once however busy the
// machine is.
#pragma once

#include <cstdint>

namespace sal::console {

// The CPU time of its own after which a chunk computes in idle time.
constexpr int64_t kEvalForegroundCpuMs = 20;
// How often the loop looks at a running chunk's CPU time.
constexpr int64_t kEvalPaceCheckMs = 10;

enum class PaceMove { none, to_idle, back_to_normal };

class EvalPacing {
 public:
  explicit EvalPacing(int64_t budget_ms) : budget_ms_(budget_ms) {}

  // A budget no longer than the foreground time leaves the chunk where it is.
  bool needed() const { return budget_ms_ > kEvalForegroundCpuMs; }

  // At a look: the wall time since the chunk began and the CPU time it has used. After the move
  // at its budget (done()), no more looks are needed.
  PaceMove look(int64_t elapsed_ms, int64_t cpu_ms) {
    if (done_) return PaceMove::none;
    if (elapsed_ms >= budget_ms_) {
      done_ = true;
      return idle_ ? PaceMove::back_to_normal : PaceMove::none;
    }
    if (idle_ || cpu_ms < kEvalForegroundCpuMs) return PaceMove::none;
    idle_ = true;
    return PaceMove::to_idle;
  }

  bool done() const { return done_; }
  bool idle() const { return idle_; }

 private:
  int64_t budget_ms_;
  bool idle_ = false;
  bool done_ = false;
};

}  // namespace sal::console

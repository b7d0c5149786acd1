// deadline.h — the deadline of the budgeted call this thread is running, for long C++ loops inside
// it. A sandboxed Lua call (lua/sandbox.h) sets it for its duration; the algorithm library that
// policies call (engine/policy/algo: searches, enumerations, Monte Carlo, flows, matchings) asks
// deadline_passed() every few thousand iterations and stops early. The Lua binding then raises the
// budget's error rather than return what the stopped loop had, so an early stop is never taken for
// an answer. Outside a budgeted call there is no deadline and loops run to their own limits.
#pragma once

#include <cstdint>

namespace sal {

// Sets this thread's deadline (CLOCK_MONOTONIC ns) while it lives; nested scopes keep the earlier.
class DeadlineScope {
 public:
  explicit DeadlineScope(int64_t deadline_ns);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  int64_t saved_;
};

// True once this thread's deadline, if any, has passed (one clock read).
bool deadline_passed();

// For loops: true every `every`-th call (a power of two) whose deadline has passed.
inline bool deadline_passed_every(uint64_t& counter, uint64_t every = 4096) {
  return (++counter & (every - 1)) == 0 && deadline_passed();
}

}  // namespace sal

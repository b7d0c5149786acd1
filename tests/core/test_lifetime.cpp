// test_lifetime.cpp — a thread's scheduling class (core/lifetime.h): run_in_idle_time moves a
// running thread into SCHED_IDLE and back to SCHED_OTHER at the nice value it had before. The way
// back needs CAP_SYS_NICE (or RLIMIT_NICE): the test runs as root only, and reports skipped otherwise.
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "core/lifetime.h"

using namespace sal;

namespace {

struct Seen {
  int policy = -1;
  int nice = 0;
};

// The thread's class and nice value, as the kernel reports them (a thread reads its own).
Seen seen_by(std::atomic<int>& ask, std::atomic<int>& answer_policy, std::atomic<int>& answer_nice) {
  int n = ask.load();
  ask = n + 1;
  while (ask.load() != n + 2) std::this_thread::yield();
  return Seen{answer_policy.load(), answer_nice.load()};
}

}  // namespace

TEST_CASE("run_in_idle_time moves a thread into the idle class and back at its nice value" *
          doctest::skip(geteuid() != 0)) {
  std::atomic<int> ask{0}, policy{-1}, nice{0};
  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::thread t([&] {
    lower_this_thread_priority(10);
    tid = this_thread_id();
    while (!stop) {
      if (ask.load() % 2 == 1) {
        policy = sched_getscheduler(0);
        nice = getpriority(PRIO_PROCESS, id_t(this_thread_id()));
        ask = ask.load() + 1;
      }
      std::this_thread::yield();
    }
  });
  Seen before = seen_by(ask, policy, nice);
  CHECK(before.policy == SCHED_OTHER);
  CHECK(before.nice == 10);
  REQUIRE(tid > 0);
  REQUIRE(tid != this_thread_id());
  REQUIRE(run_in_idle_time(tid, true));
  CHECK(seen_by(ask, policy, nice).policy == SCHED_IDLE);
  CHECK(run_in_idle_time(tid, false));
  Seen after = seen_by(ask, policy, nice);
  stop = true;
  t.join();
  CHECK(after.policy == SCHED_OTHER);
  CHECK(after.nice == 10);
  // Id 0 would be the calling thread's: it is refused, and the caller keeps its class.
  CHECK_FALSE(run_in_idle_time(0, true));
  CHECK(sched_getscheduler(0) == SCHED_OTHER);
}

// test_process.cpp — what the kernel says of a process (mesh/process.h: sample_process), which an
// agent reads to tell a busy worker from a stopped or dead one: the state letter and the CPU time,
// parsed from /proc/PID/stat even when the command name holds spaces and parentheses.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mesh/process.h"

using namespace sal;
using namespace sal::mesh;

TEST_CASE("a /proc stat line gives the state and the CPU time, whatever the command name holds") {
  auto s = parse_process_stat("4242 (sal (worker) 1) R 1 2 3 4 5 6 7 8 9 10 120 30 0 0 20 0 4");
  REQUIRE(s.ok());
  CHECK(s->state == 'R');
  CHECK(s->cpu_ticks == 150);
  CHECK_FALSE(parse_process_stat("garbage").ok());
  CHECK_FALSE(parse_process_stat("1 (x) S 1 2").ok());
}

TEST_CASE("a running process uses CPU, a stopped one is 'T', a gone one is an error") {
  auto me = sample_process(getpid());
  REQUIRE(me.ok());
  CHECK(me->state == 'R');  // this thread is reading it
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) pause();
  }
  kill(child, SIGSTOP);
  bool stopped = false;
  for (int i = 0; i < 200 && !stopped; ++i) {
    auto s = sample_process(child);
    stopped = s.ok() && (s->state == 'T' || s->state == 't');
    if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(stopped);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CHECK_FALSE(sample_process(child).ok());
}

TEST_CASE("a silent child is busy while runnable, in the kernel, or its CPU time grew within the window") {
  constexpr int64_t ms = 1'000'000, window = 300 * ms, now = 10'000 * ms;
  auto in = [](char state) { return ProcessSample{state, 7}; };
  CHECK(busy_process(in('R'), 0, now, window) == Busy::runnable);
  CHECK(busy_process(in('D'), 0, now, window) == Busy::in_kernel);
  // asleep: computing while a look found its CPU time grown within the window — a worker at a
  // fifth of a CPU may gain no 10 ms tick between two looks 100 ms apart (the g4dn drill's worker
  // killed 100 ms after it was found busy)
  CHECK(busy_process(in('S'), now - 150 * ms, now, window) == Busy::computing);
  CHECK(busy_process(in('S'), now - 299 * ms, now, window) == Busy::computing);
  // a hang: no CPU for the whole window, or never seen using any
  CHECK(busy_process(in('S'), now - 300 * ms, now, window) == Busy::no);
  CHECK(busy_process(in('S'), 0, now, window) == Busy::no);
  // stopped (SIGSTOP, a tracer) or gone is never busy, whatever its CPU did just before
  for (char state : {'T', 't', 'Z', 'X'}) CHECK(busy_process(in(state), now - ms, now, window) == Busy::no);
  CHECK(std::string(busy_name(Busy::in_kernel)) == "waiting in the kernel");
}

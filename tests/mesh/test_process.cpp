// test_process.cpp — what the kernel says of a process (mesh/process.h: sample_process), which an
// agent reads to tell a busy worker from a stopped or dead one: the state letter and the CPU time,
// parsed from /proc/PID/stat even when the command name holds spaces and parentheses. And what a
// child started with a heap on huge pages finds in its environment.
#include <doctest/doctest.h>
#include <uv.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/heap.h"
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

namespace {

// Runs `sh -c script` as a ChildProcess (huge_page_heap as given) to its end; what it printed.
std::string child_output(const std::string& script, bool huge_page_heap) {
  const auto log = std::filesystem::temp_directory_path() / ("sal-process-" + std::to_string(getpid()) + ".log");
  std::filesystem::remove(log);
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool exited = false;
  {
    ChildProcess child(&loop, [&](int64_t, int) { exited = true; });
    SpawnOptions so;
    so.exe = "/bin/sh";
    so.args = {"-c", script};
    so.log_file = log.string();
    so.huge_page_heap = huge_page_heap;
    REQUIRE(child.spawn(so).ok());
    while (!exited) uv_run(&loop, UV_RUN_ONCE);
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the handle's close
  uv_loop_close(&loop);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(log);
  return text.str();
}

}  // namespace

TEST_CASE("a child started with a heap on huge pages gets glibc's tunables for it, an operator's own kept") {
  const char* saved = std::getenv(kTunablesVariable);
  const std::string restore = saved ? saved : "";
  const std::string print = std::string("printf '%s|%s' \"$") + kTunablesVariable + "\" \"$HOME\"";
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";

  unsetenv(kTunablesVariable);
  CHECK(child_output(print, true) == "glibc.malloc.hugetlb=1|" + home);
  CHECK(child_output(print, false) == "|" + home);  // inherited as it is: unset

  setenv(kTunablesVariable, "glibc.malloc.hugetlb=0", 1);  // the operator's choice wins
  CHECK(child_output(print, true) == "glibc.malloc.hugetlb=0|" + home);
  CHECK(child_output(print, false) == "glibc.malloc.hugetlb=0|" + home);

  if (saved) setenv(kTunablesVariable, restore.c_str(), 1);
  else unsetenv(kTunablesVariable);
}

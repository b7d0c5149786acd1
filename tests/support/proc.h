// proc.h — processes for integration tests: start the real `salamander` binary in its own process
// group with output to a file, read what it printed, signal it, and make sure that it and
// everything it started is gone when the test ends (the destructor SIGKILLs the group).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/temp_dirs.h"  // temp_dir: the tests' scratch directories

namespace sal::test {

class Proc {
 public:
  Proc() = default;
  Proc(pid_t pid, std::string log) : pid_(pid), log_(std::move(log)) {}
  Proc(Proc&& o) noexcept;
  Proc& operator=(Proc&& o) noexcept;
  ~Proc();

  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  bool running();                       // not exited (reaps it if it has)
  int wait(int timeout_ms);             // exit status (128+signal if killed), -1 on timeout
  void signal(int sig);                 // the process itself
  void kill_group();                    // SIGKILL the whole process group, then reap
  std::string output() const;           // everything it printed so far
  // The rest of the first line starting with `prefix`, waiting up to timeout_ms ("" on timeout).
  std::string wait_for_line(const std::string& prefix, int timeout_ms) const;

 private:
  pid_t pid_ = -1;
  std::string log_;
  int status_ = -1;
};

// Starts `args` (args[0] is the program) in a new process group, stdout+stderr to `log`; it is
// SIGKILLed if the test process dies first (PR_SET_PDEATHSIG).
Proc spawn(const std::vector<std::string>& args, const std::string& log);
// True if pid exists and is not a zombie.
bool pid_alive(pid_t pid);
// A "kB" line of /proc/PID/status — "VmRSS" (resident now), "VmHWM" (the peak resident so far) —
// in KiB; -1 if the process or the line is not there.
int64_t status_kb(pid_t pid, const std::string& field);
// The value that follows `option` on a running process's command line ("" if none): how a test
// finds, say, the ipc endpoint an agent gave its worker (--agent).
std::string command_line_value(pid_t pid, const std::string& option);
// Polls `pred` every `every_ms` until true or timeout; returns whether it became true.
bool eventually(const std::function<bool()>& pred, int timeout_ms, int every_ms = 5);
// steady_clock in ms: CLOCK_MONOTONIC on Linux, so comparable with the events' mono_ns.
double now_ms();

}  // namespace sal::test

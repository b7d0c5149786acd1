// process.h — child processes on a libuv loop (uv_spawn): the agent's workers, `run`'s agents.
// The exit callback fires as soon as the child exits (SIGCHLD), which is how a worker's death is
// reported at once. Children die with their parent (core/lifetime.h, called by the child itself at
// start-up from --parent-pid), so no process outlives the one that started it.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::mesh {

struct SpawnOptions {
  std::string exe;
  std::vector<std::string> args;   // without argv[0]
  std::string log_file;            // stdout+stderr appended here; empty: inherit ours
  int pass_fd = -1;                // >= 0: this descriptor of ours is the child's fd 3
  bool own_session = false;        // a session of its own: a terminal's Ctrl-C reaches only us
};

// What the kernel says of a process now (/proc/PID/stat): its state letter ('R' running, 'S'
// sleeping, 'D' in an uninterruptible wait, 'T' stopped, 'Z' a zombie, ...) and the CPU time it
// used (user + system, in clock ticks). An error when there is no such process.
struct ProcessSample {
  char state = '?';
  uint64_t cpu_ticks = 0;
};
Result<ProcessSample> sample_process(pid_t pid);
// Parses a /proc/PID/stat line (exposed for tests: the command name may hold spaces and parens).
Result<ProcessSample> parse_process_stat(const std::string& line);

// What a silent child's process says of it (an agent's worker past its liveness window): still at
// work — runnable and waiting for a CPU, in an uninterruptible wait in the kernel (a page fault or
// I/O the host is slow to serve), or its CPU time grew within the last `window_ns` (`cpu_grew_ns`:
// when a look last found it grown, 0 never; the kernel counts it in ticks of 10 ms, so a process
// starved of CPU may gain none between two looks a heartbeat apart while it computes) — or not:
// stopped (SIGSTOP), gone, or asleep without using CPU, which is a hang.
enum class Busy { no, runnable, in_kernel, computing };
Busy busy_process(const ProcessSample& s, int64_t cpu_grew_ns, int64_t now_ns, int64_t window_ns);
const char* busy_name(Busy b);

class ChildProcess {
 public:
  using ExitFn = std::function<void(int64_t exit_code, int term_signal)>;

  ChildProcess(uv_loop_t* loop, ExitFn on_exit);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  Status spawn(const SpawnOptions& opts);
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  void signal(int sig);

 private:
  static void on_exit_cb(uv_process_t* p, int64_t status, int sig);
  uv_loop_t* loop_;
  ExitFn on_exit_;
  uv_process_t* proc_ = nullptr;  // freed by its close callback
  pid_t pid_ = 0;
  bool running_ = false;
};

}  // namespace sal::mesh

// process.cpp — see process.h.
#include "mesh/process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace sal::mesh {

// "PID (COMMAND) STATE ..." — COMMAND may hold anything but ends at the last ')'; after it, fields
// 3 (state) and 14, 15 (utime, stime) of proc(5).
Result<ProcessSample> parse_process_stat(const std::string& line) {
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return fail("not a /proc stat line");
  std::istringstream rest(line.substr(close + 2));
  ProcessSample s;
  rest >> s.state;
  std::string skip;
  for (int field = 4; field <= 13; ++field) rest >> skip;
  uint64_t utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return fail("a /proc stat line without its CPU times");
  s.cpu_ticks = utime + stime;
  return s;
}

Result<ProcessSample> sample_process(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!f || !std::getline(f, line)) return fail("no process ", pid);
  return parse_process_stat(line);
}

Busy busy_process(const ProcessSample& s, int64_t cpu_grew_ns, int64_t now_ns, int64_t window_ns) {
  switch (s.state) {
    case 'R': return Busy::runnable;
    case 'D': return Busy::in_kernel;
    case 'T': case 't': case 'Z': case 'X': case 'x': return Busy::no;
    default: break;
  }
  return cpu_grew_ns != 0 && now_ns - cpu_grew_ns < window_ns ? Busy::computing : Busy::no;
}

const char* busy_name(Busy b) {
  switch (b) {
    case Busy::runnable: return "runnable";
    case Busy::in_kernel: return "waiting in the kernel";
    case Busy::computing: return "alive and computing";
    case Busy::no: break;
  }
  return "not busy";
}

ChildProcess::ChildProcess(uv_loop_t* loop, ExitFn on_exit) : loop_(loop), on_exit_(std::move(on_exit)) {}

ChildProcess::~ChildProcess() {
  if (proc_) {
    proc_->data = nullptr;  // the exit callback must not reach a destroyed object
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(proc_)))
      uv_close(reinterpret_cast<uv_handle_t*>(proc_),
               [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
  }
}

Status ChildProcess::spawn(const SpawnOptions& opts) {
  std::vector<std::string> argv_s;
  argv_s.push_back(opts.exe);
  argv_s.insert(argv_s.end(), opts.args.begin(), opts.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  int log_fd = -1;
  uv_stdio_container_t stdio[4];
  stdio[0].flags = UV_IGNORE;
  if (!opts.log_file.empty()) {
    log_fd = ::open(opts.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return fail("cannot open ", opts.log_file, ": ", std::strerror(errno));
    stdio[1].flags = stdio[2].flags = UV_INHERIT_FD;
    stdio[1].data.fd = stdio[2].data.fd = log_fd;
  } else {
    stdio[1].flags = stdio[2].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].data.fd = 2;
  }
  uv_process_options_t o{};
  o.file = argv_s[0].c_str();
  o.args = argv.data();
  o.exit_cb = on_exit_cb;
  o.stdio = stdio;
  o.stdio_count = 3;
  if (opts.pass_fd >= 0) {
    stdio[3].flags = UV_INHERIT_FD;
    stdio[3].data.fd = opts.pass_fd;
    o.stdio_count = 4;
  }
  if (opts.own_session) o.flags |= UV_PROCESS_DETACHED;
  proc_ = new uv_process_t{};
  proc_->data = this;
  int rc = uv_spawn(loop_, proc_, &o);
  if (log_fd >= 0) ::close(log_fd);
  if (rc != 0) {
    // uv_spawn failures still need the handle closed.
    uv_close(reinterpret_cast<uv_handle_t*>(proc_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
    proc_ = nullptr;
    return fail("cannot start ", opts.exe, ": ", uv_strerror(rc));
  }
  pid_ = proc_->pid;
  running_ = true;
  return {};
}

void ChildProcess::signal(int sig) {
  if (running_ && pid_ > 0) ::kill(pid_, sig);
}

void ChildProcess::on_exit_cb(uv_process_t* p, int64_t status, int sig) {
  auto* self = static_cast<ChildProcess*>(p->data);
  uv_close(reinterpret_cast<uv_handle_t*>(p),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
  if (!self) return;
  self->proc_ = nullptr;
  self->running_ = false;
  if (self->on_exit_) self->on_exit_(status, sig);
}

}  // namespace sal::mesh

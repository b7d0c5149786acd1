// proc.cpp — see proc.h.
#include "support/proc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace sal::test {

Proc::Proc(Proc&& o) noexcept : pid_(o.pid_), log_(std::move(o.log_)), status_(o.status_) { o.pid_ = -1; }

Proc& Proc::operator=(Proc&& o) noexcept {
  if (this != &o) {
    kill_group();
    pid_ = o.pid_;
    log_ = std::move(o.log_);
    status_ = o.status_;
    o.pid_ = -1;
  }
  return *this;
}

Proc::~Proc() { kill_group(); }

bool Proc::running() {
  if (pid_ <= 0 || status_ >= 0) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return r == 0;
}

int Proc::wait(int timeout_ms) {
  eventually([&] { return !running(); }, timeout_ms, 2);
  return running() ? -1 : status_;
}

void Proc::signal(int sig) {
  if (pid_ > 0 && status_ < 0) ::kill(pid_, sig);
}

void Proc::kill_group() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);  // the group: the process and whatever it started without a new group
  ::kill(pid_, SIGKILL);
  if (status_ < 0) {
    int st = 0;
    if (waitpid(pid_, &st, 0) == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  pid_ = -1;
}

std::string Proc::output() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Proc::wait_for_line(const std::string& prefix, int timeout_ms) const {
  std::string found;
  eventually([&] {
    std::istringstream in(output());
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(prefix, 0) == 0) {
        found = line.substr(prefix.size());
        return true;
      }
    return false;
  }, timeout_ms, 5);
  return found;
}

Proc spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    // Killed with the test process even if it is SIGKILLed before its destructors run.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return Proc(pid, log);
}

bool pid_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), {});
  auto close = content.rfind(')');
  return close != std::string::npos && close + 2 < content.size() && content[close + 2] != 'Z';
}

int64_t status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

std::string command_line_value(pid_t pid, const std::string& option) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string cmd((std::istreambuf_iterator<char>(in)), {});
  std::string key = option + '\0';
  for (size_t at = 0; at < cmd.size(); at = cmd.find('\0', at) + 1) {
    if (cmd.compare(at, key.size(), key) == 0) {
      size_t value = at + key.size();
      return cmd.substr(value, cmd.find('\0', value) - value);
    }
    if (cmd.find('\0', at) == std::string::npos) break;
  }
  return "";
}

bool eventually(const std::function<bool()>& pred, int timeout_ms, int every_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
  }
}

double now_ms() {
  return double(std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now().time_since_epoch()).count()) / 1000.0;
}

}  // namespace sal::test

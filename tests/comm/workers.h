// workers.h — real worker processes for the data-plane tests. Workers forks N children before
// the test starts any thread (so they inherit no ZeroMQ or Gloo threads); each child waits for the
// store endpoint on a pipe, runs body(rank, endpoint), writes what it returns (its report) back on
// another pipe and leaves with _exit. The destructor SIGKILLs and reaps every child still alive,
// also when a CHECK failed or an exception unwinds the test.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace sal::test {

// Collects failed expectations inside a child (doctest's macros would fail in the child's copy).
class Report {
 public:
  void check(bool ok, const std::string& what) {
    if (!ok) errors_ += "FAIL " + what + "\n";
  }
  void note(const std::string& line) { notes_ += line + "\n"; }
  bool ok() const { return errors_.empty(); }
  std::string text() const { return (ok() ? std::string("OK\n") : errors_) + notes_; }

 private:
  std::string errors_;
  std::string notes_;
};

class Workers {
 public:
  using Body = std::function<std::string(int rank, const std::string& endpoint)>;

  Workers(int n, Body body) {
    for (int r = 0; r < n; ++r) {
      int go[2];
      int out[2];
      if (pipe(go) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        ::close(go[1]);
        ::close(out[0]);
        for (const auto& c : children_) {  // the earlier siblings' parent ends
          ::close(c.go_fd);
          ::close(c.out_fd);
        }
        run_child(r, go[0], out[1], body);
      }
      ::close(go[0]);
      ::close(out[1]);
      children_.push_back(Child{pid, go[1], out[0], "", -1});
    }
  }

  ~Workers() {
    for (auto& c : children_) {
      if (c.status < 0) {
        ::kill(c.pid, SIGKILL);
        int st = 0;
        waitpid(c.pid, &st, 0);
        c.status = 0;
      }
      close_fd(c.go_fd);
      close_fd(c.out_fd);
    }
  }

  // Lets every child start, with the store endpoint.
  void go(const std::string& endpoint) {
    for (auto& c : children_) {
      std::string line = endpoint + "\n";
      (void)!write(c.go_fd, line.data(), line.size());
      close_fd(c.go_fd);
    }
  }

  pid_t pid(int rank) const { return children_[size_t(rank)].pid; }

  void kill(int rank, int sig) { ::kill(children_[size_t(rank)].pid, sig); }

  // Waits until every child has exited (SIGKILLing the rest at the deadline) and returns each
  // child's report; a child that died without reporting gets "DIED status=...".
  std::vector<std::string> collect(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      bool all_done = true;
      for (auto& c : children_) {
        drain(c);
        if (c.status < 0) {
          int st = 0;
          if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
            drain(c);
            c.status = st;
          } else {
            all_done = false;
          }
        }
      }
      if (all_done) break;
      if (std::chrono::steady_clock::now() > deadline) {
        for (auto& c : children_) {
          if (c.status < 0) {
            ::kill(c.pid, SIGKILL);
            c.report += "KILLED at the test deadline\n";
          }
        }
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::vector<std::string> out;
    for (auto& c : children_) {
      if (c.report.empty()) c.report = "DIED status=" + std::to_string(c.status) + "\n";
      out.push_back(c.report);
    }
    return out;
  }

 private:
  struct Child {
    pid_t pid;
    int go_fd;
    int out_fd;
    std::string report;
    int status;  // waitpid status once reaped, -1 before
  };

  [[noreturn]] static void run_child(int rank, int go_fd, int out_fd, const Body& body) {
    std::string endpoint;
    char ch;
    while (read(go_fd, &ch, 1) == 1 && ch != '\n') endpoint += ch;
    ::close(go_fd);
    std::string report;
    if (endpoint.empty()) {
      report = "FAIL no endpoint (the test gave up before go())\n";
    } else {
      try {
        report = body(rank, endpoint);
      } catch (const std::exception& e) {
        report = std::string("FAIL exception: ") + e.what() + "\n";
      }
    }
    const char* p = report.data();
    size_t left = report.size();
    while (left > 0) {
      ssize_t n = write(out_fd, p, left);
      if (n <= 0) break;
      p += n;
      left -= size_t(n);
    }
    ::close(out_fd);
    _exit(0);  // no destructors of the parent's objects, no atexit handlers
  }

  static void drain(Child& c) {
    if (c.out_fd < 0) return;
    for (;;) {
      pollfd p{c.out_fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return;
      char buf[4096];
      ssize_t n = read(c.out_fd, buf, sizeof buf);
      if (n <= 0) {
        close_fd(c.out_fd);
        return;
      }
      c.report.append(buf, size_t(n));
    }
  }

  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  std::vector<Child> children_;
};

// The value after "key=" in a report, or "" (reports hold lines like "abort_ms=0.41").
inline std::string report_value(const std::string& report, const std::string& key) {
  auto at = report.find(key + "=");
  if (at == std::string::npos) return "";
  auto start = at + key.size() + 1;
  return report.substr(start, report.find('\n', start) - start);
}

}  // namespace sal::test

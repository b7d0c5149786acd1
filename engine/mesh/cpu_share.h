// cpu_share.h — fair measurement of many workers on few cores: each worker process in a CPU
// cgroup of its own with a CFS bandwidth quota of `share` CPUs, so N workers on C cores behave
// like N dedicated cores of `share` speed instead of time-sharing the C cores (where a worker that
// waits gives its core to another, and the busiest worker never sets the pace). A benchmark option
// (`salamander run --cpu-share F`, `salamander agent --cpu-share F`), never on by default.
//
// Linux cgroup v1 `cpu` controller, mounted at /sys/fs/cgroup/cpu and writable (root): under it a
// directory (default "salamander"), and in it one group per worker, named
// a<agent pid>-w<worker index>: cpu.cfs_period_us, cpu.cfs_quota_us = share x period, the pid
// into cgroup.procs (all its threads, present and future). The agent removes a worker's group when
// the worker exits and all of its groups when it ends; groups of agents that died (SIGKILL) are
// removed by the next agent or run that prunes the directory. Where the controller is missing or
// not writable, open() says so and the caller runs unconfined.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/result.h"

namespace sal::mesh {

// Where the cgroup v1 cpu controller is mounted on these machines.
constexpr const char* kCpuCgroupRoot = "/sys/fs/cgroup/cpu";
// The directory under it that holds salamander's groups.
constexpr const char* kCpuShareDir = "salamander";

class CpuShares {
 public:
  // Opens (creates) <root>/<dir>, checking the controller is there, writable and has CFS
  // bandwidth control. share: CPUs per group, in (0, 64].
  static Result<CpuShares> open(double share, const std::string& dir = kCpuShareDir,
                                const std::string& root = kCpuCgroupRoot);

  // Puts `pid` (all its threads) into a new group `name` with this object's quota.
  Status confine(pid_t pid, const std::string& name) const;
  // Removes group `name`; a process still in it is moved to the root group first.
  Status release(const std::string& name) const;
  // Removes every group named a<pid>-w<i> whose agent pid is no longer running (left by an agent
  // that was killed). Returns how many.
  int prune_dead() const;
  // Removes this object's directory if no group is left in it (best effort).
  void remove_if_empty() const;

  double share() const { return share_; }
  int64_t period_us() const { return period_us_; }
  int64_t quota_us() const { return quota_us_; }
  const std::string& path() const { return path_; }

  // The group name the agent with `agent_pid` gives its worker `index`.
  static std::string worker_group(pid_t agent_pid, uint32_t index);

 private:
  CpuShares(std::string root, std::string path, double share, int64_t period_us, int64_t quota_us)
      : root_(std::move(root)), path_(std::move(path)), share_(share), period_us_(period_us), quota_us_(quota_us) {}

  std::string root_, path_;
  double share_ = 0;
  int64_t period_us_ = 0, quota_us_ = 0;
};

// A process's CPU group under the salamander directory (`--cpu-share` put it there), as a path:
// "/sys/fs/cgroup/cpu/salamander/a123-w0". Fails, saying so, for a process that is not confined.
Result<std::string> confined_group(pid_t pid, const std::string& root = kCpuCgroupRoot,
                                   const std::string& dir = kCpuShareDir);
// A group's CFS quota (µs per period), and a new one (at least the kernel's 1 ms).
Result<int64_t> group_quota(const std::string& group);
Status set_group_quota(const std::string& group, int64_t quota_us);

}  // namespace sal::mesh

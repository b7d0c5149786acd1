// cpu_share.cpp — see cpu_share.h.
#include "mesh/cpu_share.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace sal::mesh {
namespace {

// The CFS period: short, so a quota is spread over the step in slices of a few milliseconds (a
// 100 ms period would let a worker run 25 ms and then stall 75 ms while its peers wait for it).
// The kernel wants quota and period of at least 1 ms; a share below 0.1 CPU lengthens the period.
constexpr int64_t kPeriodUs = 10000;
constexpr int64_t kMinQuotaUs = 1000;
constexpr double kMaxShare = 64;

std::string errno_text() { return std::strerror(errno); }

Status write_value(const std::string& file, const std::string& value) {
  std::ofstream out(file);
  if (!out) return fail("cannot open ", file, " for writing: ", errno_text());
  out << value << std::flush;
  if (!out) return fail("cannot write '", value, "' to ", file, ": ", errno_text());
  return {};
}

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return {};
  return fail("cannot create ", path, ": ", errno_text());
}

std::vector<std::string> subdirectories(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (e->d_type == DT_DIR && e->d_name[0] != '.') out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

// "a1234-w0" -> 1234; 0 for any other name.
pid_t agent_of(const std::string& name) {
  if (name.size() < 4 || name[0] != 'a') return 0;
  size_t dash = name.find("-w");
  if (dash == std::string::npos || dash == 1) return 0;
  pid_t pid = 0;
  for (size_t i = 1; i < dash; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

bool running(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

Result<CpuShares> CpuShares::open(double share, const std::string& dir, const std::string& root) {
  if (!(share > 0) || share > kMaxShare) return fail("--cpu-share must be in (0, ", kMaxShare, "] CPUs, got ", share);
  struct stat st {};
  const std::string quota_file = root + "/cpu.cfs_quota_us";
  if (::stat(quota_file.c_str(), &st) != 0)
    return fail("no cgroup v1 cpu controller with CFS bandwidth control at ", root, " (", quota_file, ": ",
                errno_text(), ")");
  const std::string path = root + "/" + dir;
  if (auto s = make_dir(path); !s) return s.error().with_context("cpu share groups");
  int64_t period = kPeriodUs, quota = std::llround(share * double(kPeriodUs));
  if (quota < kMinQuotaUs) {
    quota = kMinQuotaUs;
    period = std::llround(double(kMinQuotaUs) / share);
  }
  return CpuShares(root, path, share, period, quota);
}

std::string CpuShares::worker_group(pid_t agent_pid, uint32_t index) {
  return "a" + std::to_string(agent_pid) + "-w" + std::to_string(index);
}

Status CpuShares::confine(pid_t pid, const std::string& name) const {
  const std::string group = path_ + "/" + name;
  SAL_TRY(make_dir(group));
  SAL_TRY(write_value(group + "/cpu.cfs_period_us", std::to_string(period_us_)));
  SAL_TRY(write_value(group + "/cpu.cfs_quota_us", std::to_string(quota_us_)));
  return write_value(group + "/cgroup.procs", std::to_string(pid));
}

Status CpuShares::release(const std::string& name) const {
  const std::string group = path_ + "/" + name;
  if (::rmdir(group.c_str()) == 0 || errno == ENOENT) return {};
  if (errno != EBUSY) return fail("cannot remove ", group, ": ", errno_text());
  std::ifstream procs(group + "/cgroup.procs");
  for (std::string pid; std::getline(procs, pid);)
    if (!pid.empty()) (void)write_value(root_ + "/cgroup.procs", pid);
  if (::rmdir(group.c_str()) == 0) return {};
  return fail("cannot remove ", group, ": ", errno_text());
}

int CpuShares::prune_dead() const {
  int removed = 0;
  for (const std::string& name : subdirectories(path_)) {
    const pid_t agent = agent_of(name);
    if (agent > 0 && !running(agent) && release(name)) ++removed;
  }
  return removed;
}

void CpuShares::remove_if_empty() const { (void)::rmdir(path_.c_str()); }

Result<std::string> confined_group(pid_t pid, const std::string& root, const std::string& dir) {
  const std::string proc = "/proc/" + std::to_string(pid) + "/cgroup";
  std::ifstream in(proc);
  if (!in) return fail("cannot read ", proc, ": ", errno_text());
  // cgroup v1 lines: "4:cpu,cpuacct:/salamander/a123-w0"
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",cpu,") == std::string::npos) continue;
    const std::string path = line.substr(b + 1);
    if (path.rfind("/" + dir + "/", 0) != 0)
      return fail("process ", pid, " is in cpu group ", path, ", not one of /", dir,
                  "/ (its workers are confined only under --cpu-share)");
    return root + path;
  }
  return fail("process ", pid, " has no cgroup v1 cpu group (", proc, ")");
}

Result<int64_t> group_quota(const std::string& group) {
  std::ifstream in(group + "/cpu.cfs_quota_us");
  int64_t q = 0;
  if (!(in >> q)) return fail("cannot read ", group, "/cpu.cfs_quota_us");
  return q;
}

Status set_group_quota(const std::string& group, int64_t quota_us) {
  return write_value(group + "/cpu.cfs_quota_us", std::to_string(std::max(quota_us, kMinQuotaUs)));
}

}  // namespace sal::mesh

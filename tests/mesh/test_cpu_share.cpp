// test_cpu_share.cpp — the workers' CPU cgroups (mesh/cpu_share.h): the quota each group gets, the
// refusal where there is no cgroup v1 cpu controller, and — where this machine has a writable one
// (as root on the project's machines) — a real process confined, found in its group, and the group
// removed after it, also when its agent died without cleaning up.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "mesh/cpu_share.h"
#include "support/temp_dirs.h"

using sal::mesh::CpuShares;

namespace {

std::string file_contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A child that sleeps until killed.
pid_t sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    std::_Exit(0);
  }
  return pid;
}

void reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// The controller here, if this machine has a writable one (otherwise the live cases say why they skip).
bool controller_writable() {
  return exists(std::string(sal::mesh::kCpuCgroupRoot) + "/cpu.cfs_quota_us") &&
         ::access(sal::mesh::kCpuCgroupRoot, W_OK) == 0;
}

}  // namespace

TEST_CASE("cpu share: the quota is share x a 10 ms period, longer periods below 0.1 CPU") {
  const std::string root = sal::test::temp_dir("cgroup");
  std::ofstream(root + "/cpu.cfs_quota_us") << "-1\n";  // what makes it look like the controller
  auto half = CpuShares::open(0.5, "sal-test", root);
  REQUIRE(half.ok());
  CHECK(half->period_us() == 10000);
  CHECK(half->quota_us() == 5000);
  CHECK(exists(root + "/sal-test"));
  auto small = CpuShares::open(0.05, "sal-test", root);
  REQUIRE(small.ok());
  CHECK(small->quota_us() == 1000);  // the kernel's minimum quota
  CHECK(small->period_us() == 20000);
  auto two = CpuShares::open(2, "sal-test", root);
  REQUIRE(two.ok());
  CHECK(two->quota_us() == 20000);
  // confine writes the period, the quota and the pid into the group's files
  REQUIRE(half->confine(4242, "a1-w0").ok());
  CHECK(file_contents(root + "/sal-test/a1-w0/cpu.cfs_period_us") == "10000");
  CHECK(file_contents(root + "/sal-test/a1-w0/cpu.cfs_quota_us") == "5000");
  CHECK(file_contents(root + "/sal-test/a1-w0/cgroup.procs") == "4242");
  CHECK(CpuShares::worker_group(1234, 3) == "a1234-w3");
  std::system(("rm -rf " + root).c_str());
}

TEST_CASE("cpu share: refused with a reason where there is no cpu controller, or a bad share") {
  auto none = CpuShares::open(0.25, "sal-test", "/tmp/no-such-cgroup-root");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("no cgroup v1 cpu controller") != std::string::npos);
  CHECK(none.error().message().find("/tmp/no-such-cgroup-root/cpu.cfs_quota_us") != std::string::npos);
  CHECK_FALSE(CpuShares::open(0, "sal-test", "/tmp").ok());
  CHECK_FALSE(CpuShares::open(-1, "sal-test", "/tmp").ok());
  CHECK_FALSE(CpuShares::open(65, "sal-test", "/tmp").ok());
}

TEST_CASE("cpu share: a live process is confined to its own group, which goes with it") {
  if (!controller_writable()) {
    MESSAGE("skipped: no writable cgroup v1 cpu controller at ", sal::mesh::kCpuCgroupRoot);
    return;
  }
  auto shares = CpuShares::open(0.25, "salamander-test-live");
  REQUIRE(shares.ok());
  const pid_t child = sleeper();
  const std::string name = CpuShares::worker_group(::getpid(), 0);
  auto s = shares->confine(child, name);
  INFO((s.ok() ? "" : s.error().message()));
  REQUIRE(s.ok());
  const std::string membership = file_contents("/proc/" + std::to_string(child) + "/cgroup");
  CHECK(membership.find(":cpu:/salamander-test-live/" + name) != std::string::npos);
  CHECK(file_contents(shares->path() + "/" + name + "/cpu.cfs_quota_us") == "2500\n");
  // released while the process still runs: it goes back to the root group, the group goes
  REQUIRE(shares->release(name).ok());
  CHECK_FALSE(exists(shares->path() + "/" + name));
  reap(child);
  shares->remove_if_empty();
}

TEST_CASE("cpu share: groups of agents that died are pruned, those of live agents kept") {
  if (!controller_writable()) {
    MESSAGE("skipped: no writable cgroup v1 cpu controller at ", sal::mesh::kCpuCgroupRoot);
    return;
  }
  auto shares = CpuShares::open(0.25, "salamander-test-prune");
  REQUIRE(shares.ok());
  const pid_t dead_agent = sleeper();
  reap(dead_agent);  // its pid is free now: an agent that was SIGKILLed
  const pid_t worker = sleeper();
  const std::string orphan = CpuShares::worker_group(dead_agent, 0), mine = CpuShares::worker_group(::getpid(), 1);
  REQUIRE(shares->confine(worker, orphan).ok());
  reap(worker);  // the worker died with its agent; the empty group stays behind
  REQUIRE(shares->confine(::getpid(), mine).ok());
  CHECK(shares->prune_dead() >= 1);
  CHECK_FALSE(exists(shares->path() + "/" + orphan));
  CHECK(exists(shares->path() + "/" + mine));  // this process is alive
  REQUIRE(shares->release(mine).ok());  // moves this process back to the root group
  CHECK_FALSE(exists(shares->path() + "/" + mine));
  shares->remove_if_empty();
  CHECK_FALSE(exists(shares->path()));
}

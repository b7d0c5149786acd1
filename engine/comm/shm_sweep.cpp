// shm_sweep.cpp — see shm_sweep.h.
#include "comm/shm_sweep.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>
#include <vector>

namespace sal::comm {

namespace fs = std::filesystem;

namespace {

bool is_pid(const std::string& name) {
  return !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
}

// The paths under `dir` that some process has open (its fds) or mapped (its maps). Processes this
// user cannot read are skipped: UCX's segments are mode 0600, so only this user's processes (or
// root's, which a non-root sweeper cannot see) can hold them.
std::set<std::string> held_under(const std::string& dir) {
  std::set<std::string> held;
  const std::string prefix = dir + "/";
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    if (!is_pid(proc.path().filename().string())) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      std::string target = fs::read_symlink(fd.path(), link_ec).string();
      if (!link_ec && target.compare(0, prefix.size(), prefix) == 0) held.insert(target);
    }
    std::ifstream maps(proc.path() / "maps");
    for (std::string line; std::getline(maps, line);)
      if (size_t at = line.find(prefix); at != std::string::npos) held.insert(line.substr(at));
  }
  return held;
}

// UCX's name, this user's, untouched for `min_age`: a candidate (still to be checked for holders).
bool stale_candidate(const fs::directory_entry& e, std::chrono::seconds min_age, uint64_t* bytes) {
  if (e.path().filename().string().rfind(kUcxSegmentPrefix, 0) != 0) return false;
  struct stat st {};
  if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return false;
  *bytes = uint64_t(st.st_size);
  return std::time(nullptr) - st.st_mtime >= min_age.count();
}

}  // namespace

Result<ShmSweep> sweep_ucx_segments(const std::string& given, std::chrono::seconds min_age) {
  std::error_code ec;
  const std::string dir = fs::canonical(given, ec).string();  // as the fds' links and the maps name it
  if (ec) return fail("reading ", given, ": ", ec.message());
  std::vector<std::pair<std::string, uint64_t>> candidates;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    uint64_t bytes = 0;
    if (stale_candidate(e, min_age, &bytes)) candidates.push_back({e.path().string(), bytes});
  }
  if (ec) return fail("reading ", dir, ": ", ec.message());
  ShmSweep out;
  if (candidates.empty()) return out;
  const std::set<std::string> held = held_under(dir);
  for (const auto& [path, bytes] : candidates) {
    if (held.count(path)) {
      ++out.in_use;
      continue;
    }
    if (::unlink(path.c_str()) != 0) {
      if (errno == ENOENT) continue;  // another sweeper took it
      return fail("removing ", path, ": ", std::strerror(errno));
    }
    ++out.removed;
    out.bytes += bytes;
  }
  return out;
}

void sweep_ucx_segments_logged() {
  std::error_code ec;
  if (!fs::is_directory("/dev/shm", ec)) return;  // no posix shared memory here: nothing UCX could leave
  auto swept = sweep_ucx_segments();
  if (!swept) return spdlog::warn("sweeping stale UCX shared-memory segments: {}", swept.error().message());
  if (swept->removed)
    spdlog::info("removed {} stale UCX shared-memory segment(s) of killed workers from /dev/shm ({:.1f} MB)",
                 swept->removed, double(swept->bytes) / 1e6);
}

}  // namespace sal::comm

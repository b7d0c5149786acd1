// shm_prefault.cpp — see shm_prefault.h.
#include "comm/shm_prefault.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

namespace sal::comm {

namespace {

#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif

// A mapping of this process: its range and the inode of its file.
using Mapping = std::tuple<uintptr_t, uintptr_t, uint64_t>;

// What was prefaulted, by prefix, still mapped when last looked. Never destroyed: the plane's
// background thread (the next epoch's worker) may still be here while the process exits.
struct State {
  std::mutex mu;
  std::map<std::string, std::set<Mapping>> done;
  bool unsupported = false;
};
State& state() {
  static State* s = new State;
  return *s;
}

// The shared, writable mappings of files whose name starts with `prefix` ("/proc/self/maps":
// start-end perms offset dev inode path, the path of an unlinked file ending " (deleted)").
std::vector<Mapping> segments(const std::string& prefix) {
  std::vector<Mapping> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, path;
    uint64_t inode = 0;
    if (!(in >> range >> perms >> offset >> dev >> inode >> path)) continue;
    const size_t slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (perms.size() < 4 || perms[1] != 'w' || perms[3] != 's') continue;
    unsigned long long start = 0, end = 0;
    if (std::sscanf(range.c_str(), "%llx-%llx", &start, &end) != 2 || end <= start) continue;
    out.emplace_back(uintptr_t(start), uintptr_t(end), inode);
  }
  return out;
}

}  // namespace

Prefaulted prefault_segments(const std::string& prefix) {
  Prefaulted got;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.unsupported) {
    got.supported = false;
    return got;
  }
  std::set<Mapping>& done = st.done[prefix];
  std::set<Mapping> still;
  for (const Mapping& m : segments(prefix)) {
    still.insert(m);
    if (done.count(m)) continue;
    const auto [start, end, inode] = m;
    if (::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0) {
      got.mappings += 1;
      got.bytes += end - start;
    } else if (errno == EINVAL) {  // a kernel before 5.14
      st.unsupported = true;
      got.supported = false;
      return got;
    }  // else unmapped meanwhile, or a page that cannot be had: left to fault as before
    done.insert(m);
  }
  // forget what is no longer mapped: the same range may later hold another segment
  for (auto it = done.begin(); it != done.end();) it = still.count(*it) ? std::next(it) : done.erase(it);
  return got;
}

}  // namespace sal::comm

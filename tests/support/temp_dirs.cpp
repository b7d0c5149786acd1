// temp_dirs.cpp — see temp_dirs.h.
#include "support/temp_dirs.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace sal::test {
namespace {

struct Made {
  std::string path;
  pid_t by;  // a forked child that returns through main must not remove its parent's directories
};

std::mutex& made_mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<Made>& made() {
  static std::vector<Made> dirs;
  return dirs;
}

bool keep_all() {
  const char* keep = std::getenv("SAL_KEEP_TEST_DIRS");
  return keep && *keep && std::strcmp(keep, "0") != 0;
}

}  // namespace

std::string temp_dir(const std::string& tag, const std::string& under) {
  std::string path = under + "/sal-" + tag + "-XXXXXX";
  if (::mkdtemp(path.data()) == nullptr)
    throw std::runtime_error("cannot make a test directory " + path + ": " + std::strerror(errno));
  std::lock_guard<std::mutex> lock(made_mutex());
  made().push_back({path, ::getpid()});
  return path;
}

int finish_temp_dirs(int rc) {
  std::lock_guard<std::mutex> lock(made_mutex());
  const pid_t self = ::getpid();
  std::vector<std::string> ours;
  for (const auto& m : made())
    if (m.by == self) ours.push_back(m.path);
  made().clear();
  if (ours.empty()) return rc;
  if (rc != 0 || keep_all()) {
    std::fprintf(stderr, "%s kept (%s):\n", ours.size() == 1 ? "test directory" : "test directories",
                 rc != 0 ? "a test failed" : "SAL_KEEP_TEST_DIRS");
    for (const auto& p : ours) std::fprintf(stderr, "  %s\n", p.c_str());
    return rc;
  }
  for (const auto& p : ours) {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);  // a leftover process may still write there: best effort
  }
  return rc;
}

}  // namespace sal::test

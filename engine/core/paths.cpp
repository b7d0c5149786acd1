// paths.cpp — see paths.h.
#include "core/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace sal {

Result<std::string> self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return fail("readlink /proc/self/exe: ", std::strerror(errno));
  return std::string(buf, size_t(n));
}

std::string self_spawn_exe() {
  static const std::string kGone = " (deleted)";  // what the kernel appends to a replaced file's link
  auto exe = self_exe();
  if (!exe) return "salamander";
  const bool gone = exe->size() > kGone.size() && exe->compare(exe->size() - kGone.size(), kGone.size(), kGone) == 0;
  return gone ? "/proc/self/exe" : *exe;  // a child's /proc/self/exe is the image it was forked from
}

Status make_dirs(const std::string& path, unsigned mode) {
  if (path.empty()) return {};
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
        return fail("mkdir ", cur, ": ", std::strerror(errno));
    }
  }
  return {};
}

Result<std::string> runtime_dir() {
  std::string dir;
  if (const char* x = getenv("XDG_RUNTIME_DIR"); x && *x) {
    dir = std::string(x) + "/salamander";
  } else {
    dir = "/tmp/salamander-" + std::to_string(getuid());
  }
  SAL_TRY(make_dirs(dir, 0700));
  struct stat st{};
  if (stat(dir.c_str(), &st) != 0) return fail("stat ", dir, ": ", std::strerror(errno));
  if (st.st_uid != getuid()) return fail(dir, " is owned by another user");
  return dir;
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail(path, " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open ", path, ": ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  if (size < 0) return fail("cannot read ", path);
  if (size_t(size) > max_bytes)
    return fail(path, " is ", size_t(size), " bytes, more than the limit of ", max_bytes);
  in.seekg(0);
  std::string data(size_t(size), '\0');
  in.read(data.data(), size);
  if (!in) return fail("cannot read ", path);
  return data;
}

Status write_file(const std::string& path, const std::string& contents, unsigned mode) {
  return write_file(path, std::vector<std::string_view>{contents}, mode);
}

Status write_file(const std::string& path, const std::vector<std::string_view>& parts, unsigned mode) {
  // A name of this writer's own: two processes (or threads) may write the same file at once —
  // two holders of a unit writing it into one snapshot — and each renames a whole file over it.
  static std::atomic<uint64_t> seq{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(seq++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail("cannot create ", tmp, ": ", std::strerror(errno));
  for (std::string_view part : parts) {
    const char* p = part.data();
    size_t left = part.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        ::close(fd);
        ::unlink(tmp.c_str());
        return fail("cannot write ", tmp, ": ", std::strerror(errno));
      }
      p += n;
      left -= size_t(n);
    }
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno));
  return {};
}

std::string hostname() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

std::string dir_name(const std::string& path) {
  auto pos = path.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char buf[4096];
  if (!getcwd(buf, sizeof buf)) return path;
  std::string cwd = buf;
  if (path.empty() || path == ".") return cwd;
  if (path.rfind("./", 0) == 0) return cwd + "/" + path.substr(2);
  return cwd + "/" + path;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace sal

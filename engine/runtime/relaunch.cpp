// relaunch.cpp — see relaunch.h.
#include "runtime/relaunch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/clock.h"

namespace sal::runtime {
namespace {

constexpr const char* kPendingFlag = "--pending-plan-fd";
constexpr const char* kRelaunchedFlag = "--relaunched-at";
constexpr uint32_t kMaxFrames = 64;

Status write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail("writing the pending plan: ", std::strerror(errno));
    p += w;
    n -= size_t(w);
  }
  return {};
}

// This process's arguments, without an earlier relaunch's flags.
Result<std::vector<std::string>> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.empty()) return fail("reading /proc/self/cmdline: nothing there");
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    args.emplace_back(all.substr(at, end - at));
    at = end + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == kPendingFlag || args[i] == kRelaunchedFlag) && i + 1 < args.size()) {
      ++i;
      continue;
    }
    out.push_back(args[i]);
  }
  return out;
}

// Every descriptor from 3 on close-on-exec, but `keep`.
void close_on_exec_but(int keep) {
  constexpr unsigned kCloexec = 1u << 2;  // CLOSE_RANGE_CLOEXEC (Linux 5.11)
  if (::syscall(SYS_close_range, 3u, ~0u, kCloexec) != 0) {
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (dirent* e = ::readdir(d)) {
        int fd = std::atoi(e->d_name);
        if (fd >= 3 && fd != ::dirfd(d)) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
      ::closedir(d);
    }
  }
  ::fcntl(keep, F_SETFD, 0);
}

Status read_all(int fd, void* into, size_t n, off_t& at) {
  char* p = static_cast<char*>(into);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return fail("the pending plan ends early (", r < 0 ? std::strerror(errno) : "end of file", ")");
    p += r;
    n -= size_t(r);
    at += r;
  }
  return {};
}

}  // namespace

// [frames u32] then per frame [bytes u64][bytes].
Result<int> pending_file(const wire::Parts& frames) {
  int fd = int(::syscall(SYS_memfd_create, "sal-pending-plan", 0u));  // inherited: no MFD_CLOEXEC
  if (fd < 0) return fail("memfd_create: ", std::strerror(errno));
  uint32_t count = uint32_t(frames.size());
  Status s = write_all(fd, &count, sizeof count);
  for (const auto& f : frames) {
    uint64_t n = f.size();
    if (s) s = write_all(fd, &n, sizeof n);
    if (s) s = write_all(fd, f.data(), f.size());
  }
  if (!s) {
    ::close(fd);
    return s.error();
  }
  return fd;
}

Status relaunch(const wire::Parts& pending) {
  auto fd = pending_file(pending);
  if (!fd) return fd.error().with_context("relaunching");
  auto args = own_arguments();
  if (!args) {
    ::close(*fd);
    return args.error().with_context("relaunching");
  }
  args->insert(args->end(), {kPendingFlag, std::to_string(*fd), kRelaunchedFlag, std::to_string(mono_ns())});
  std::vector<char*> argv;
  for (auto& a : *args) argv.push_back(a.data());
  argv.push_back(nullptr);
  close_on_exec_but(*fd);
  ::execv("/proc/self/exe", argv.data());
  const std::string why = std::strerror(errno);
  ::close(*fd);
  return fail("relaunching: exec /proc/self/exe: ", why);
}

Result<wire::Parts> take_pending(int fd) {
  off_t at = 0;
  uint32_t count = 0;
  wire::Parts out;
  Status s = read_all(fd, &count, sizeof count, at);
  if (s && count > kMaxFrames) s = fail("the pending plan claims ", count, " frames");
  for (uint32_t i = 0; s && i < count; ++i) {
    uint64_t n = 0;
    s = read_all(fd, &n, sizeof n, at);
    if (s && n > wire::kMaxFrameBytes) s = fail("the pending plan's frame ", i, " claims ", n, " bytes");
    if (!s) break;
    zmq::message_t m{static_cast<size_t>(n)};
    s = read_all(fd, m.data(), size_t(n), at);
    out.push_back(std::move(m));
  }
  ::close(fd);
  if (!s) return s.error().with_context("descriptor " + std::to_string(fd));
  return out;
}

}  // namespace sal::runtime

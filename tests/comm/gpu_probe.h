// gpu_probe.h — the GPUs of this machine, asked in a forked child so that the calling process never
// initialises CUDA. The NCCL test and benchmark fork one worker process per GPU, and a child cannot
// use CUDA once its parent has initialised it before the fork; so the parent stays CUDA-free and
// learns the count, the names and the library versions from this short-lived child.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"

namespace sal::test {

struct GpuProbe {
  int count = 0;                   // 0: no usable GPU (or no driver)
  std::vector<std::string> names;  // describe(i) for each
  std::string versions;            // library_versions(): cudart, cuBLAS, NCCL
};

inline GpuProbe probe_gpus() {
  GpuProbe p;
  int fds[2];
  if (pipe(fds) != 0) return p;
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return p;
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    int n = sal::kernels::cuda::device_count();
    out += std::to_string(n) + "\n" + sal::kernels::cuda::library_versions() + "\n";
    for (int i = 0; i < n; ++i) out += sal::kernels::cuda::describe(i) + "\n";
    const char* at = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t w = write(fds[1], at, left);
      if (w <= 0) break;
      at += w;
      left -= size_t(w);
    }
    _exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t r = read(fds[0], buf, sizeof buf);
    if (r <= 0) break;
    text.append(buf, size_t(r));
  }
  ::close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return p;  // the child died: count stays 0
  try {
    p.count = std::stoi(line);
  } catch (...) {
    return GpuProbe{};
  }
  std::getline(in, p.versions);
  while (std::getline(in, line)) p.names.push_back(line);
  if (int(p.names.size()) != p.count) return GpuProbe{};
  return p;
}

// The probe made by the test main (nccl_main.cpp) before any test runs.
inline GpuProbe& probed_gpus() {
  static GpuProbe p;
  return p;
}

}  // namespace sal::test

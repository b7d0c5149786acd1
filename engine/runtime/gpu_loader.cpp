// gpu_loader.cpp — see gpu_loader.h.
#include "runtime/gpu_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>

namespace sal::runtime {
namespace {

std::string executable_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, size_t(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Loads the plugin once; later calls return the same entry point or the same error.
Result<GpuMakeFn> load_plugin() {
  static std::mutex mu;
  static GpuMakeFn make = nullptr;
  static std::string error;
  std::lock_guard<std::mutex> lock(mu);
  if (make) return make;
  if (!error.empty()) return fail(error);
  std::string path = gpu_plugin_path();
  if (access(path.c_str(), F_OK) != 0) {
    error = "this build of salamander has no CUDA path (no GPU backend at " + path + ")";
    return fail(error);
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed: the backend lives as long as the process
  if (!handle) {
    error = std::string("cannot load the GPU backend: ") + dlerror();
    return fail(error);
  }
  auto entry = reinterpret_cast<GpuMakeFn (*)()>(dlsym(handle, kGpuPluginEntry));
  if (!entry) {
    error = "the GPU backend " + path + " has no entry point " + kGpuPluginEntry;
    return fail(error);
  }
  make = entry();
  return make;
}

}  // namespace

std::string gpu_plugin_path() { return executable_dir() + "/" + kGpuPluginFile; }

DeviceFactory gpu_factory() {
  return [](int ordinal, const DeviceOptions& options) -> Result<std::unique_ptr<DeviceCompute>> {
    auto make = load_plugin();
    if (!make) return make.error().with_context("cuda:" + std::to_string(ordinal));
    return (*make)(ordinal, options);
  };
}

}  // namespace sal::runtime

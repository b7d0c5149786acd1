// gpu_loader.h — how a worker reaches the GPU backend without every salamander process paying for
// it. The backend (gpu_backend.h, with cuBLAS, cuBLASLt and NCCL behind it: hundreds of MB of
// libraries) is built as a plugin, libsalamander_gpu.so, next to the salamander binary, and
// loaded with dlopen the first time a cuda:N worker opens its GPU. CPU-only processes (the
// controller, agents, CPU workers, the REPL) never load it: they start in milliseconds and stay
// small. A build without the CUDA path has no plugin, and the factory says so.
#pragma once

#include <string>

#include "runtime/device_compute.h"

namespace sal::runtime {

// The plugin's one entry point, looked up by this name: it returns the backend's make function.
using GpuMakeFn = Result<std::unique_ptr<DeviceCompute>> (*)(int ordinal, const DeviceOptions& options);
constexpr const char* kGpuPluginEntry = "salamander_gpu_make";
constexpr const char* kGpuPluginFile = "libsalamander_gpu.so";

// Where the plugin is looked for: beside the running executable.
std::string gpu_plugin_path();

// A DeviceFactory that loads the plugin on first use (once per process) and opens GPU `ordinal`
// through it. Its errors name the device and the plugin path.
DeviceFactory gpu_factory();

}  // namespace sal::runtime

// gpu_plugin.cpp — the entry point of libsalamander_gpu.so, the GPU backend as a plugin
// (gpu_loader.h loads it): hands the loader make_gpu_compute (gpu_backend.h).
#include "runtime/gpu_backend.h"
#include "runtime/gpu_loader.h"

extern "C" __attribute__((visibility("default"))) sal::runtime::GpuMakeFn salamander_gpu_make() {
  return &sal::runtime::make_gpu_compute;
}

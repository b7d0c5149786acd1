// device.h — CUDA devices as the engine sees them: how many there are (0, not an error, when the
// machine has no GPU or no driver), a one-line description of each, and its UUID.
#pragma once

#include <string>

namespace sal::kernels::cuda {

// Number of usable GPUs; 0 on any CUDA error (no driver, no device).
int device_count();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)", or the CUDA error text.
std::string describe(int device);
// The GPU's UUID as 32 hex digits (cudaDeviceProp::uuid): the same physical GPU gives the same
// text in every process, so ranks can tell whether they share one. Empty on any CUDA error.
std::string device_uuid(int device);
// Versions of the runtime, cuBLAS and NCCL this binary was built against ("cudart 13000, ...").
std::string library_versions();

}  // namespace sal::kernels::cuda

// device.cu — see device.h.
#include "kernels/cuda/device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

namespace sal::kernels::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return n;
}

std::string describe(int device) {
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                double(p.totalGlobalMem) / double(1ull << 30));
  return buf;
}

std::string device_uuid(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  std::string out;
  char hex[3];
  for (char byte : p.uuid.bytes) {
    std::snprintf(hex, sizeof hex, "%02x", unsigned(static_cast<unsigned char>(byte)));
    out += hex;
  }
  return out;
}

std::string library_versions() {
  int rt = 0, nccl = 0;
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  char buf[128];
  std::snprintf(buf, sizeof buf, "cudart %d, cuBLAS %d.%d.%d, NCCL %d", rt, major, minor, patch, nccl);
  return buf;
}

}  // namespace sal::kernels::cuda

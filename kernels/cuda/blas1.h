// blas1.h — level-1 vector kernels on the GPU; same operations as kernels/cpu/blas1.h, on device
// pointers. Errors come back as cudaError_t values (0 = success), never as exceptions.
#pragma once

#include <cstddef>

namespace sal::kernels::cuda {

// y[i] += a * x[i] on device memory; returns a cudaError_t.
int axpy(size_t n, float a, const float* x, float* y);

}  // namespace sal::kernels::cuda

// blas1.h — level-1 vector kernels on the GPU; same operations as kernels/cpu/blas1.h, on device
// pointers, enqueued on the Context's stream.
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// y[i] += a * x[i] on device memory.
Status axpy(const Context& ctx, size_t n, float a, const float* x, float* y);

}  // namespace sal::kernels::cuda

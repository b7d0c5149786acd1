// blas1.h — level-1 vector kernels, CPU reference. kernels/cuda/blas1.h has the same operations on
// device memory; tests/kernels checks one against the other.
#pragma once

#include <cstddef>

namespace sal::kernels::cpu {

// y[i] += a * x[i]
void axpy(size_t n, float a, const float* x, float* y);

}  // namespace sal::kernels::cpu

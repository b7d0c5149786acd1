// blas1.cpp — see blas1.h.
#include "kernels/cpu/blas1.h"

namespace sal::kernels::cpu {

void axpy(size_t n, float a, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace sal::kernels::cpu

// convert.h — fp32 <-> bf16 copies on the GPU. The GEMMs take bf16 operands made from the fp32
// activations and master weights (context.h): to_bf16 makes such a copy, rounding each float to
// the nearest bf16 with ties to even (NaN stays NaN, values beyond the bf16 range become inf, as
// IEEE rounding gives); to_float widens back, which is exact.
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// y[i] = bf16(x[i]), round to nearest even. x [n] fp32, y [n] bf16 (must not overlap).
Status to_bf16(const Context& ctx, const float* x, Bf16* y, size_t n);

// y[i] = float(x[i]) (exact). x [n] bf16, y [n] fp32 (must not overlap).
Status to_float(const Context& ctx, const Bf16* x, float* y, size_t n);

}  // namespace sal::kernels::cuda

// rope.h — rotary position embeddings on the GPU, the operator of kernels/cpu/rope.h on device
// pointers: in place on the columns [col0, col0 + heads * hd) of rows of ld floats, each head
// rotated in pairs (i, i + hd/2) by pos * theta^(-2i/hd), pos = row mod T. The angle and its cosine
// and sine are computed in double, as the CPU's table is, then rounded to float: the rotation itself
// is the CPU's arithmetic, so results agree to an ulp or two.
#pragma once

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// x [rows, ld] on the device, rotated in place. Needs col0 >= 0 and col0 + heads * hd <= ld.
Status rope_forward(const Context& ctx, float* x, int rows, int T, int ld, int col0, int heads, int hd, float theta);

// The inverse rotation: the gradient of rope_forward.
Status rope_backward(const Context& ctx, float* dx, int rows, int T, int ld, int col0, int heads, int hd,
                     float theta);

}  // namespace sal::kernels::cuda

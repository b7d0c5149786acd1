// grid.cuh — the grid of a grid-stride kernel over n elements (included by .cu files only): enough
// blocks of `threads` to cover n, capped at 32 blocks per multiprocessor (each thread then loops),
// and at least one.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

inline unsigned grid_for(const Context& ctx, size_t n, int threads = 256) {
  const size_t want = (n + size_t(threads) - 1) / size_t(threads);
  const size_t cap = size_t(std::max(1, ctx.sm_count())) * 32;
  return unsigned(std::max<size_t>(1, std::min(want, cap)));
}

}  // namespace sal::kernels::cuda

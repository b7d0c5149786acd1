// parallel.h — threads for the CPU kernels: one pool of our own, sized by set_threads(n), splits
// every kernel — GEMMs by tiles of C, the others by rows, columns or (batch, head) pairs. OpenBLAS is
// pinned to one thread (on first use of the pool) and called from inside the pool's tasks, so there
// is one set of threads and no idle BLAS threads spinning beside ours.
//
// Determinism: every split hands each output element to exactly one task, which computes it in a
// fixed order, and reductions go through fixed-size chunks summed in chunk order; how work is cut
// depends on the shapes, never on the thread count. So results are bit for bit the same whatever
// the thread count. The kernels are meant to be called from one thread at a time (the worker's
// compute thread); a parallel_for issued from inside a pool task runs inline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace sal::kernels::cpu {

// Sets the threads used by the kernels (OpenBLAS included). Call once at start-up (several worker
// processes on one machine must each pin this, or they oversubscribe). n < 1 is taken as 1.
// Until it is called, the kernels use OpenBLAS's own default count (every core, or
// OPENBLAS_NUM_THREADS / OMP_NUM_THREADS). OpenBLAS itself stays at one thread either way: code that
// calls cblas directly, outside these kernels, runs single-threaded.
void set_threads(int n);
int num_threads();

// Columns per block of a pass that reduces over rows column by column (the GEMM's column sums, the
// norm's parameter gradients, the embedding's backward scatter): one block's sums stay in
// registers/L1, and the cut depends on the width only.
constexpr int kColumnBlock = 64;

namespace detail {

// A borrowed callable f(begin, end): no allocation, no ownership; lives for the call only.
class RangeFn {
 public:
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, RangeFn>)
  RangeFn(const F& f)
      : obj_(&f), call_([](const void* o, size_t b, size_t e) { (*static_cast<const F*>(o))(b, e); }) {}
  void operator()(size_t begin, size_t end) const { call_(obj_, begin, end); }

 private:
  const void* obj_;
  void (*call_)(const void*, size_t, size_t);
};

// Runs f over [0, count) split into contiguous ranges of at least `grain` items (grain >= 1; one
// range, on this thread, when there is little work), a few per thread, taken by whichever thread is
// free. Returns when all are done. f must give the same results however [0, count) is cut.
void parallel_for_range(size_t count, size_t grain, RangeFn f);

template <class F>
void parallel_for(size_t count, size_t grain, F&& f) {
  parallel_for_range(count, grain, RangeFn(f));
}

// Rows per range for a row-wise kernel over rows of `width` floats: ~kRowWork floats per range, so a
// pool hand-off (a few microseconds) is worth it.
constexpr size_t kRowWork = 8192;
inline size_t row_grain(int width) { return std::max<size_t>(1, kRowWork / size_t(std::max(1, width))); }

// sum over chunks c of f(c * chunk, min(count, (c + 1) * chunk)), each chunk on one thread, the chunk
// results added in chunk order: the same double whatever the thread count.
double parallel_sum_range(size_t count, size_t chunk, double (*f)(const void*, size_t, size_t),
                          const void* ctx);

template <class F>
double parallel_sum(size_t count, size_t chunk, const F& f) {
  return parallel_sum_range(
      count, chunk, [](const void* c, size_t b, size_t e) { return (*static_cast<const F*>(c))(b, e); }, &f);
}

// A float buffer of at least n elements owned by the calling thread, reused across calls (pool
// threads live as long as the process, so this allocates once per size increase, not per call).
float* thread_scratch(size_t n);

}  // namespace detail
}  // namespace sal::kernels::cpu

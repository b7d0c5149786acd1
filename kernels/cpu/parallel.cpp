// parallel.cpp — see parallel.h. The pool: n-1 persistent worker threads plus the calling thread.
// A job is cut into chunks, published under a mutex with a generation number; workers wake on a
// condition variable and every participant, the caller included, claims chunks from an atomic
// counter until none is left. A worker that wakes late (its core busy with another process) finds
// the chunks taken and goes back to sleep: the caller never waits for a thread that has not started,
// only for chunks already claimed. Which thread runs a chunk never changes its result.
#include "kernels/cpu/parallel.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sal::kernels::cpu {
namespace {

// Chunks per thread of a job: a few, so a busy or late core does not leave the others waiting.
constexpr size_t kChunksPerThread = 4;

// True on a thread while it runs pool chunks: nested parallel_for calls then run inline.
thread_local bool t_in_task = false;

class Pool {
 public:
  ~Pool() { resize(1); }

  int threads() const { return int(workers_.size()) + 1; }

  void resize(int threads) {
    stop_workers();
    // New workers start from the current generation: they must not take an old job for a new one,
    // nor miss a job published before they first take the lock.
    const uint64_t generation = generation_;
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, generation] { worker_loop(generation); });
  }

  // Runs f over [0, count) cut into `chunks` ranges (2 <= chunks), on this thread and any worker
  // that joins in time.
  void run(size_t count, size_t chunks, const detail::RangeFn& f) {
    {
      std::lock_guard lock(mu_);
      job_ = Job{&f, count, chunks};
      next_.store(0, std::memory_order_relaxed);
      open_ = true;
      ++generation_;
    }
    wake_.notify_all();
    claim_chunks(job_);
    std::unique_lock lock(mu_);
    open_ = false;  // every chunk is claimed: no one joins any more
    done_.wait(lock, [this] { return active_ == 0; });
  }

 private:
  struct Job {
    const detail::RangeFn* fn = nullptr;
    size_t count = 0, chunks = 0;
  };

  void claim_chunks(const Job& job) {
    t_in_task = true;
    for (size_t c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < job.chunks;)
      (*job.fn)(job.count * c / job.chunks, job.count * (c + 1) / job.chunks);
    t_in_task = false;
  }

  void worker_loop(uint64_t seen) {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (!open_) continue;  // finished before this thread got here
      const Job job = job_;
      ++active_;
      lock.unlock();
      claim_chunks(job);
      lock.lock();
      if (--active_ == 0) done_.notify_one();
    }
  }

  void stop_workers() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stopping_ = false;
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  Job job_;                       // the job being run (valid while open_ or active_ > 0)
  bool open_ = false;             // chunks may still be unclaimed: workers may join
  size_t active_ = 0;             // workers inside claim_chunks
  std::atomic<size_t> next_{0};   // the next chunk to claim
};

// The pool, sized on first use from OpenBLAS's own default, after which OpenBLAS is pinned to one
// thread: its GEMMs run inside our tasks.
Pool& pool() {
  static Pool* p = [] {
    static Pool instance;
    const int blas_default = openblas_get_num_threads();
    openblas_set_num_threads(1);
    instance.resize(std::max(1, blas_default));
    return &instance;
  }();
  return *p;
}

}  // namespace

void set_threads(int n) {
  pool().resize(std::max(1, n));
  openblas_set_num_threads(1);  // in case something else changed it since
}

int num_threads() { return pool().threads(); }

namespace detail {

void parallel_for_range(size_t count, size_t grain, RangeFn f) {
  if (count == 0) return;
  const size_t threads = t_in_task ? 1 : size_t(pool().threads());
  const size_t max_chunks = std::max<size_t>(1, count / std::max<size_t>(1, grain));
  if (threads <= 1 || max_chunks <= 1) {
    f(0, count);
    return;
  }
  pool().run(count, std::min(max_chunks, threads * kChunksPerThread), f);
}

double parallel_sum_range(size_t count, size_t chunk, double (*f)(const void*, size_t, size_t),
                          const void* ctx) {
  if (count == 0) return 0.0;
  chunk = std::max<size_t>(1, chunk);
  const size_t chunks = (count + chunk - 1) / chunk;
  thread_local std::vector<double> partials;
  if (partials.size() < chunks) partials.resize(chunks);
  double* out = partials.data();
  parallel_for(chunks, 1, [&](size_t c0, size_t c1) {
    for (size_t c = c0; c < c1; ++c) out[c] = f(ctx, c * chunk, std::min(count, (c + 1) * chunk));
  });
  double sum = 0.0;
  for (size_t c = 0; c < chunks; ++c) sum += out[c];
  return sum;
}

float* thread_scratch(size_t n) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace detail
}  // namespace sal::kernels::cpu

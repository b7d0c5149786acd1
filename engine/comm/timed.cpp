// timed.cpp — see timed.h.
#include "comm/timed.h"

#include <sys/resource.h>
#include <time.h>

#include "core/clock.h"

namespace sal::comm {
namespace {

class Timed final : public Collectives {
 public:
  Timed(std::unique_ptr<Collectives> inner, std::shared_ptr<WaitClock> clock)
      : inner_(std::move(inner)), clock_(std::move(clock)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status allreduce_sum(float* data, size_t n) override { return clocked([&] { return inner_->allreduce_sum(data, n); }); }
  Status allreduce_sum(double* data, size_t n) override { return clocked([&] { return inner_->allreduce_sum(data, n); }); }
  Status allgather(const void* in, size_t bytes, void* out) override {
    return clocked([&] { return inner_->allgather(in, bytes, out); });
  }
  Status alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                   const std::vector<int64_t>& recv_counts) override {
    return clocked([&] { return inner_->alltoallv(send, send_counts, recv, recv_counts); });
  }
  Status send(int peer, const void* data, size_t bytes, uint32_t tag) override {
    return clocked([&] { return inner_->send(peer, data, bytes, tag); });
  }
  Status recv(int peer, void* data, size_t bytes, uint32_t tag) override {
    return clocked([&] { return inner_->recv(peer, data, bytes, tag); });
  }
  Status exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) override {
    return clocked([&] { return inner_->exchange(sends, recvs); });
  }
  Status barrier() override { return clocked([&] { return inner_->barrier(); }); }
  void abort(const std::string& why) override { inner_->abort(why); }
  bool aborted() const override { return inner_->aborted(); }
  void set_op_timeout(std::chrono::milliseconds t) override { inner_->set_op_timeout(t); }
  std::chrono::milliseconds op_timeout() const override { return inner_->op_timeout(); }
  bool narrows() const override { return inner_->narrows(); }
  Result<std::unique_ptr<Collectives>> narrow(std::vector<int> members, std::string prefix) override {
    auto n = inner_->narrow(std::move(members), std::move(prefix));
    if (!n) return n.error();
    return timed(std::move(*n), clock_);
  }

 private:
  template <class F>
  Status clocked(F&& call) {
    const int64_t t0 = mono_ns(), c0 = thread_cpu_ns(), p0 = process_cpu_ns();
    Status s = call();
    clock_->ns += mono_ns() - t0;
    clock_->thread_cpu_ns += thread_cpu_ns() - c0;
    clock_->process_cpu_ns += process_cpu_ns() - p0;
    return s;
  }

  std::unique_ptr<Collectives> inner_;
  std::shared_ptr<WaitClock> clock_;
};

int64_t cpu_ns(clockid_t which) {
  timespec ts{};
  clock_gettime(which, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int64_t thread_cpu_ns() { return cpu_ns(CLOCK_THREAD_CPUTIME_ID); }
int64_t process_cpu_ns() { return cpu_ns(CLOCK_PROCESS_CPUTIME_ID); }

int64_t thread_page_faults() {
  rusage u{};
  if (getrusage(RUSAGE_THREAD, &u) != 0) return 0;
  return int64_t(u.ru_minflt) + int64_t(u.ru_majflt);
}

std::unique_ptr<Collectives> timed(std::unique_ptr<Collectives> inner, std::shared_ptr<WaitClock> clock) {
  return std::make_unique<Timed>(std::move(inner), std::move(clock));
}

}  // namespace sal::comm

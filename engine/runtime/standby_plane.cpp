// standby_plane.cpp — see standby_plane.h.
#include "runtime/standby_plane.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "comm/timed.h"
#include "core/clock.h"

namespace sal::runtime {

namespace {

// Below the step's thread within the worker's CPU share (a per-thread nice value on Linux): the
// standby's work waits while the step computes.
constexpr int kNice = 10;

}  // namespace

StandbyPlane::StandbyPlane(comm::GlooOptions o, std::unique_ptr<comm::StoreClient> store, size_t warm_floats)
    : prefix_(o.prefix), store_(std::move(store)) {
  thread_ = std::thread([this, o = std::move(o), warm_floats] { run(o, warm_floats); });
}

StandbyPlane::~StandbyPlane() {
  stop("the standby plane is dropped");
  if (thread_.joinable()) thread_.join();
}

void StandbyPlane::run(comm::GlooOptions o, size_t warm_floats) {
  (void)::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), kNice);
  const int64_t t0 = mono_ns(), cpu0 = comm::thread_cpu_ns();
  auto c = comm::connect_gloo(o, *store_);
  const double connect_ms = double(mono_ns() - t0) / 1e6, connect_cpu_ms = double(comm::thread_cpu_ns() - cpu0) / 1e6;
  comm::Collectives* plane = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c && !stopped_) plane_ = std::move(*c), plane = plane_.get();
  }
  if (!plane) {
    if (!c) spdlog::debug("standby plane {}: not connected ({})", prefix_, c.error().message());
    finished_ = true;
    return;  // a plane connected after stop() is destroyed here, which its peers see
  }
  // the first call reaches every peer: their queues and descriptors are mapped (then in bulk)
  std::vector<float> warm(std::max<size_t>(warm_floats, size_t(o.size)), 0.0f);
  const int64_t t1 = mono_ns(), cpu1 = comm::thread_cpu_ns();
  Status s = plane->allreduce_sum(warm.data(), warm.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s && !stopped_) {
      ready_ = true;
      spdlog::debug("standby plane {}: connected in {:.1f} ms ({:.1f} ms of CPU), warm in {:.1f} ms ({:.1f} ms of CPU)",
                    prefix_, connect_ms, connect_cpu_ms, double(mono_ns() - t1) / 1e6,
                    double(comm::thread_cpu_ns() - cpu1) / 1e6);
    } else {
      if (!s) spdlog::debug("standby plane {}: not warmed ({})", prefix_, s.error().message());
      plane_.reset();
    }
  }
  finished_ = true;
}

std::unique_ptr<comm::Collectives> StandbyPlane::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_ || stopped_) return nullptr;
  ready_ = false;
  return std::move(plane_);
}

bool StandbyPlane::live() {
  std::lock_guard<std::mutex> lock(mu_);
  return !stopped_ && (ready_ || !finished_.load());
}

void StandbyPlane::stop(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  store_->interrupt();
  if (plane_) plane_->abort(why);
}

void StandbyYard::retire(std::unique_ptr<StandbyPlane> s, const std::string& why) {
  reap();
  if (!s) return;
  s->stop(why);
  stopped_.push_back(std::move(s));
}

void StandbyYard::reap() {
  stopped_.erase(std::remove_if(stopped_.begin(), stopped_.end(), [](const auto& s) { return s->finished(); }),
                 stopped_.end());
}

}  // namespace sal::runtime

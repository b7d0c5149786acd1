// standby_plane.cpp — see standby_plane.h.
#include "runtime/standby_plane.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

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

namespace {

// One store round among a patch's ranks: whether every one of them holds a standby plane warm.
Result<bool> every_rank_has(const comm::GlooOptions& o, comm::StoreClient& store, bool mine) {
  const std::string base = o.prefix + "/standby/";
  const auto timeout = std::chrono::milliseconds(o.rendezvous_timeout_ms > 0 ? o.rendezvous_timeout_ms
                                                                             : o.connect_timeout_ms);
  SAL_TRY(store.put(base + std::to_string(o.rank), {mine ? '1' : '0'}));
  std::vector<std::string> keys;
  for (int r = 0; r < o.size; ++r) keys.push_back(base + std::to_string(r));
  SAL_TRY(store.wait_for(keys, timeout));
  bool all = true;
  for (const auto& k : keys) {
    auto v = store.fetch(k, timeout);
    if (!v) return v.error();
    all = all && v->size() == 1 && (*v)[0] == '1';
  }
  return all;
}

}  // namespace

Result<PatchPlane> patch_plane(const std::vector<int>& members, const comm::GlooOptions& o, comm::StoreClient& store,
                               std::unique_ptr<comm::Collectives> standby) {
  auto all = every_rank_has(o, store, standby != nullptr);
  if (!all) return all.error().with_context("whether every rank holds the standby plane");
  if (*all && standby) {
    auto n = standby->narrow(members, o.prefix);
    if (!n) return n.error();
    return PatchPlane{std::move(*n), true};
  }
  if (standby) standby->abort("not every rank of the patch holds the standby plane");
  auto c = comm::connect_gloo(o, store);
  if (!c) return c.error();
  return PatchPlane{std::move(*c), false};
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

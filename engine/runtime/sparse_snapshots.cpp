// sparse_snapshots.cpp — see sparse_snapshots.h.
#include "runtime/sparse_snapshots.h"

#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include <algorithm>

#include "ckpt/slice_frames.h"
#include "core/clock.h"
#include "core/thread_name.h"
#include "ckpt/slice_mac.h"
#include "comm/timed.h"
#include "wire/curve.h"

namespace sal::runtime {
namespace {

constexpr int kPutQueue = 64;  // slots queued towards one peer before a put is missed
constexpr size_t kLogQueue = 8;  // logs waiting for the log thread before the oldest is dropped

}  // namespace

SparseSnapshots::SparseSnapshots(zmq::context_t& ctx)
    : ctx_(ctx), thread_([this] { run(); }), log_thread_([this] { run_logs(); }) {}

SparseSnapshots::~SparseSnapshots() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  log_thread_.join();
}

void SparseSnapshots::start(const plan::CheckpointSchedule& schedule, SliceRoute route) {
  wait();
  std::lock_guard<std::mutex> lock(mu_);
  holder_.start(schedule);
  active_ = !route.peers.empty();
  route_ = std::make_shared<const SliceRoute>(std::move(route));
  ++generation_;
}

void SparseSnapshots::reroute(std::vector<wire::SliceNode> peers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!route_) return;
  auto route = std::make_shared<SliceRoute>(*route_);
  route->peers = std::move(peers);
  active_ = !route->peers.empty();
  route_ = std::move(route);
}

bool SparseSnapshots::takes_slot(uint64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  return active_ && schedule && ckpt::slot_of(*schedule, step).has_value();
}

bool SparseSnapshots::starts_window(uint64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  return schedule && ckpt::slot_of(*schedule, step) == 0u;
}

void SparseSnapshots::after_commit(uint64_t step, double grad_norm, const ModelShape& shape,
                                   std::vector<const model::Unit*> units) {
  queue(Job{step, 0, grad_norm, shape, std::move(units), {}, {}, {}, 0});
}

void SparseSnapshots::after_commit_copied(uint64_t step, double grad_norm, const ModelShape& shape,
                                          ckpt::SnapshotUnits copied) {
  queue(Job{step, 0, grad_norm, shape, {}, std::move(copied), {}, {}, 0});
}

// For the snapshot thread, under the schedule and route in force, if the step takes a slot.
void SparseSnapshots::queue(Job job) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (!job_ && !copying_); });  // one job waits at a time
  if (stop_) return;
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  if (!schedule || !active_) return;
  auto index = ckpt::slot_of(*schedule, job.step);
  if (!index) return;
  job.index = *index, job.schedule = *schedule, job.route = route_, job.generation = generation_;
  job_ = std::move(job);
  cv_.notify_all();
}

std::vector<UnitId> SparseSnapshots::slot_units(uint64_t step, const ModelShape& shape,
                                                const std::vector<UnitId>& written) const {
  std::lock_guard<std::mutex> lock(mu_);
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  if (!schedule) return {};
  auto index = ckpt::slot_of(*schedule, step);
  return index ? ckpt::slot_units(*schedule, *index, shape, written) : std::vector<UnitId>{};
}

void SparseSnapshots::put_log(uint64_t step, model::IterationLog log) {
  std::lock_guard<std::mutex> lock(mu_);
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  if (!schedule || !active_) return;
  if (logs_.size() >= kLogQueue) logs_.pop_front();
  logs_.push_back(LogJob{step, std::move(log), *schedule, route_});
  cv_.notify_all();
}

void SparseSnapshots::logs_sent() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (logs_.empty() && !log_sending_); });
}

// A job waiting for the thread reads the trainer's units only if it is not copied already: a GPU
// worker's slot is off the device (or on its way, the device fencing its own writes), and the job
// carries its own schedule and route, so neither a plan switch nor the next update waits for the
// thread to finish the slot before it (a put of a large slot can take longer than a step).
void SparseSnapshots::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !copying_ && (!job_ || job_->copied); });
}

void SparseSnapshots::run() {
  name_this_thread("sal-snapshots");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || job_; });
    if (stop_) return;
    Job job = std::move(*job_);
    job_.reset();
    copying_ = !job.copied;  // a device's copy does not read the trainer's units
    if (job.copied) cv_.notify_all();
    lock.unlock();
    take(job);
    lock.lock();
  }
}

void SparseSnapshots::run_logs() {
  name_this_thread("sal-logs");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !logs_.empty(); });
    if (stop_) return;
    LogJob log = std::move(logs_.front());
    logs_.pop_front();
    log_sending_ = true;
    lock.unlock();
    put(log);
    lock.lock();
    log_sending_ = false;
    cv_.notify_all();
  }
}

// Copies the slot (then lets the trainer go on), keeps it, and puts it to the peers.
void SparseSnapshots::take(const Job& job) {
  ckpt::SparseSlot reuse;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reuse = holder_.recycled();
  }
  const int64_t t0 = mono_ns(), cpu0 = comm::thread_cpu_ns();
  std::vector<model::Unit> off_device;
  std::vector<const model::Unit*> units = job.units;
  if (job.copied) {
    auto got = job.copied();
    if (!got) {
      spdlog::warn("the sparse snapshot slot of iteration {}: {}", job.step, got.error().message());
      return;
    }
    off_device = model::copy_units(*got);  // the slot keeps its own copy; the staging is free again
    for (const auto& u : off_device) units.push_back(&u);
  }
  auto slot = ckpt::take_slot(job.schedule, job.index, job.step, job.grad_norm, job.shape, units, std::move(reuse));
  double ms = double(mono_ns() - t0) / 1e6;
  {
    std::lock_guard<std::mutex> lock(mu_);
    copying_ = false;
    held_.copy_ms = ms;
    held_.slot_bytes = slot.bytes();
  }
  cv_.notify_all();  // the units are free again
  put(slot, job);
  std::lock_guard<std::mutex> lock(mu_);
  held_.path_cpu_ms = double(comm::thread_cpu_ns() - cpu0) / 1e6;
  if (job.generation == generation_) holder_.add(std::move(slot));
}

void SparseSnapshots::put(const ckpt::SparseSlot& slot, const Job& job) {
  const auto& route = job.route;
  if (!route || route->peers.empty()) return;
  wire::SlicePut head;
  head.writer_node = route->node, head.writer_index = route->index, head.plan = route->plan;
  head.schedule = job.schedule;
  wire::Parts frames = ckpt::encode_slot(head, slot);
  auto key = ckpt::parse_slice_mac_key(route->mac_key);
  if (!key) {
    spdlog::warn("a sparse snapshot slot of iteration {} is not put: the job's slice key: {}", slot.step,
                 key.error().message());
    return;
  }
  ckpt::seal(frames, *key);
  const uint64_t missed = send_to_peers(frames, *route, sockets_);
  if (missed == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (held_.puts_missed == 0)
    spdlog::warn("a sparse snapshot slot of iteration {} did not reach {} of {} peers (gone, or their queue is full)",
                 slot.step, missed, route->peers.size());
  held_.puts_missed += missed;
}

void SparseSnapshots::put(const LogJob& job) {
  const auto& route = job.route;
  if (!route || route->peers.empty()) return;
  auto key = ckpt::parse_slice_mac_key(route->mac_key);
  if (!key) return;  // said by every slot's put
  wire::SlicePut head;
  head.writer_node = route->node, head.writer_index = route->index, head.plan = route->plan;
  head.schedule = job.schedule, head.step = job.step;
  wire::Parts frames = ckpt::encode_log(head, ckpt::whole(job.log));
  ckpt::seal(frames, *key);
  if (const uint64_t missed = send_to_peers(frames, *route, log_sockets_, route->log_copies)) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.puts_missed += missed;
  }
}

uint64_t SparseSnapshots::send_to_peers(wire::Parts& frames, const SliceRoute& route, Sockets& sockets, size_t limit) {
  uint64_t missed = 0;
  const size_t n = limit == 0 ? route.peers.size() : std::min(limit, route.peers.size());
  for (size_t i = 0; i < n; ++i) {
    const wire::SliceNode& peer = route.peers[i];
    zmq::socket_t* s = socket_for(peer, route.key_file, sockets);
    if (!s) {
      ++missed;
      continue;
    }
    wire::Parts copy;
    for (auto& f : frames) copy.emplace_back().copy(f);  // large frames are shared, not copied
    try {
      if (!zmq::send_multipart(*s, copy, zmq::send_flags::dontwait)) ++missed;
    } catch (const zmq::error_t& e) {
      ++missed;
      spdlog::debug("slice put to {}: {}", peer.endpoint, e.what());
    }
  }
  return missed;
}

zmq::socket_t* SparseSnapshots::socket_for(const wire::SliceNode& peer, const std::string& key_file, Sockets& sockets) {
  for (auto& [ep, s] : sockets)
    if (ep == peer.endpoint) return s.get();
  auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  s->set(zmq::sockopt::linger, 0);
  s->set(zmq::sockopt::sndhwm, kPutQueue);
  if (auto st = wire::curve_client_hook(peer.endpoint, peer.key, key_file)(*s); !st) {
    spdlog::warn("slice peer {}: {}", peer.endpoint, st.error().message());
    return nullptr;
  }
  try {
    s->connect(peer.endpoint);
  } catch (const zmq::error_t& e) {
    spdlog::warn("slice peer {}: {}", peer.endpoint, e.what());
    return nullptr;
  }
  sockets.emplace_back(peer.endpoint, std::move(s));
  return sockets.back().second.get();
}

SparseHeld SparseSnapshots::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  SparseHeld h = held_;
  h.bytes = holder_.bytes();
  auto w = holder_.latest_complete();
  if (!w.empty()) h.window_from = int64_t(w.front()->step), h.window_to = int64_t(w.back()->step);
  return h;
}

}  // namespace sal::runtime

// pinned_snapshot.cpp — see pinned_snapshot.h. The slots live in a Shared object that the leases
// finish() hands out keep alive, so views the writer still holds stay valid after the snapshot
// object (and the worker's device) is gone. A slot's state says who may touch its memory: the
// training thread from begin() until its copies are enqueued, the finishing thread while it
// waits, the holder of the views while lent; the mutex guards only the states themselves.
#include "model/cuda/pinned_snapshot.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace sal::model {

struct PinnedSnapshot::Shared {
  enum class State { free, copying, taking, lent };
  struct Staged {
    UnitId id;
    size_t offset = 0, size = 0;  // w at offset, m at offset + size, v at offset + 2 size (floats)
  };
  struct Slot {
    State state = State::free;
    uint64_t ticket = 0;
    float* pinned = nullptr;  // cudaMallocHost
    size_t capacity = 0;      // floats
    std::vector<Staged> staged;
    std::shared_ptr<GpuEvent> staged_on_device, copied;
    // Staged and paced: the floats finish() still copies from the spare buffer to the pinned memory.
    const float* from = nullptr;
    size_t to_drain = 0;
  };

  std::mutex mu;
  Slot slots[kSlots];
  int spare_slot = -1;  // the slot whose units wait in the spare buffer for finish() (-1: none)
  uint64_t next_ticket = 1;

  ~Shared() {
    for (Slot& s : slots)
      if (s.pinned) (void)cudaFreeHost(s.pinned);
  }
};

// The views' keep: the slot is free again when the last copy of it goes.
class PinnedSnapshot::Lease {
 public:
  Lease(std::shared_ptr<Shared> shared, int slot) : shared_(std::move(shared)), slot_(slot) {}
  ~Lease() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->slots[slot_].state = Shared::State::free;
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

 private:
  std::shared_ptr<Shared> shared_;
  int slot_;
};

namespace {

constexpr size_t kMinFreeBytes = size_t(2) << 30;  // what staging must leave the GPU, at least

Status grow_pinned(float*& pinned, size_t& capacity, size_t floats) {
  if (floats <= capacity) return {};
  if (pinned) SAL_GPU_TRY(kc::cuda_status(int(cudaFreeHost(pinned)), "cudaFreeHost (snapshot memory)"));
  pinned = nullptr;
  capacity = 0;
  void* p = nullptr;
  SAL_GPU_TRY(kc::cuda_status(int(cudaMallocHost(&p, floats * sizeof(float))), "cudaMallocHost (snapshot memory)"));
  pinned = static_cast<float*>(p);
  capacity = floats;
  return {};
}

kc::Status copy_async(void* dst, const void* src, size_t floats, cudaMemcpyKind kind, cudaStream_t stream,
                      const char* what) {
  return kc::cuda_status(int(cudaMemcpyAsync(dst, src, floats * sizeof(float), kind, stream)), what);
}

std::string gib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", double(bytes) / double(size_t(1) << 30));
  return b;
}

Result<SnapshotStaging> staging_from_env() {
  const char* v = std::getenv("SAL_SNAPSHOT_STAGING");
  const std::string s = v ? v : "";
  if (s.empty() || s == "auto") return SnapshotStaging::automatic;
  if (s == "host") return SnapshotStaging::host;
  return fail("SAL_SNAPSHOT_STAGING='", s, "': expected 'auto' (stage snapshots in spare GPU memory where there is ",
              "room) or 'host' (copy them straight to pinned host memory)");
}

Result<size_t> chunk_from_env() {
  const char* v = std::getenv("SAL_SNAPSHOT_CHUNK_MB");
  const std::string s = v ? v : "";
  if (s.empty()) return SnapshotCopy::kDefaultChunkBytes;
  const bool digits = s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
  const size_t mb = digits ? std::stoul(s) : 0;
  if (!digits || mb > 4096)
    return fail("SAL_SNAPSHOT_CHUNK_MB='", s, "': expected a whole number of MB from 0 to 4096 (the chunk in which ",
                "a staged snapshot is copied to the host, one at a time; 0: the whole snapshot in one copy)");
  return mb << 20;
}

}  // namespace

Result<SnapshotCopy> snapshot_copy_from_env() {
  auto staging = staging_from_env();
  if (!staging) return staging.error();
  auto chunk = chunk_from_env();
  if (!chunk) return chunk.error();
  return SnapshotCopy{*staging, *chunk};
}

Result<std::unique_ptr<PinnedSnapshot>> PinnedSnapshot::create(const kc::Context& ctx, SnapshotCopy how) {
  SAL_GPU_TRY(kc::cuda_status(int(cudaSetDevice(ctx.device())), "cudaSetDevice (snapshot stream)"));
  auto shared = std::make_shared<Shared>();
  for (Shared::Slot& s : shared->slots) {
    for (auto* e : {&s.staged_on_device, &s.copied}) {
      auto made = GpuEvent::create();
      if (!made) return made.error();
      *e = std::move(*made);
    }
  }
  auto taken = GpuEvent::create();
  if (!taken) return taken.error();
  cudaStream_t stream = nullptr;
  // Non-blocking: the legacy default stream must not serialise the copies with the training.
  SAL_GPU_TRY(kc::cuda_status(int(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)),
                              "cudaStreamCreateWithFlags (snapshot copy stream)"));
  return std::unique_ptr<PinnedSnapshot>(
      new PinnedSnapshot(ctx.device(), stream, how, std::move(*taken), std::move(shared)));
}

PinnedSnapshot::~PinnedSnapshot() {
  (void)cudaSetDevice(device_);
  (void)cudaStreamSynchronize(stream_);  // the copies may still be reading the spare, writing the pinned memory
  spare_.reset();
  (void)cudaStreamDestroy(stream_);
}

int PinnedSnapshot::in_flight() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return int(std::count_if(std::begin(shared_->slots), std::end(shared_->slots),
                           [](const Shared::Slot& s) { return s.state != Shared::State::free; }));
}

size_t PinnedSnapshot::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  size_t floats = 0;
  for (const Shared::Slot& s : shared_->slots) floats += s.capacity;
  return floats * sizeof(float);
}

size_t PinnedSnapshot::staging_bytes() const { return spare_.bytes(); }
std::string PinnedSnapshot::staging_off_reason() const { return off_reason_; }

// Under the lock, for slot 0 only while it is free: the slot's copies are over (finish() waited
// for them, or a failed begin() for the stream).
Status PinnedSnapshot::reserve(size_t floats) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  Shared::Slot& s = shared_->slots[0];
  if (s.state != Shared::State::free) return {};
  return grow_pinned(s.pinned, s.capacity, floats);
}

Result<uint64_t> PinnedSnapshot::begin(DeviceParams& p, const std::vector<UnitId>& ids) {
  std::vector<DeviceUnit*> units;
  if (ids.empty()) {
    units = p.units();
  } else {
    for (const UnitId& id : ids) {
      DeviceUnit* u = p.find(id);
      if (!u) return fail("snapshot: no unit ", id.name(), " on the device");
      units.push_back(u);
    }
  }
  std::vector<Shared::Staged> staged;
  size_t need = 0;
  for (const DeviceUnit* u : units) {
    staged.push_back({u->id, need, u->size});
    need += 3 * u->size;
  }
  int slot = -1;
  uint64_t ticket = 0;
  bool spare_held = false;  // only this thread sets spare_slot: if it is free now, it stays free
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (int i = 0; i < kSlots && slot < 0; ++i)
      if (shared_->slots[i].state == Shared::State::free) slot = i;
    if (slot < 0) return fail("snapshot: all ", kSlots, " staging slots are in use (their units not yet written)");
    spare_held = shared_->spare_slot >= 0;
    Shared::Slot& s = shared_->slots[slot];
    s.state = Shared::State::copying;
    s.ticket = ticket = shared_->next_ticket++;
    s.staged = std::move(staged);
  }
  // The slot is this thread's until its copies are enqueued.
  Shared::Slot& s = shared_->slots[slot];
  Status st = grow_pinned(s.pinned, s.capacity, need);
  if (st && !spare_held) st = stage_on_device(need);
  if (st) st = enqueue(p, units, slot, need, !spare_held && need > 0 && spare_.size() >= need);
  if (!st) {
    (void)cudaStreamSynchronize(stream_);  // what was enqueued lands before anyone reuses the memory
    release(slot);
    return st.error();
  }
  return ticket;
}

void PinnedSnapshot::release(int slot) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  Shared::Slot& s = shared_->slots[slot];
  s.state = Shared::State::free;
  s.staged.clear();
  forget_spare(slot);
}

// Under the lock: the slot's units no longer wait in the spare buffer.
void PinnedSnapshot::forget_spare(int slot) {
  Shared::Slot& s = shared_->slots[slot];
  s.from = nullptr;
  s.to_drain = 0;
  if (shared_->spare_slot == slot) shared_->spare_slot = -1;
}

// Makes the spare device buffer hold `need` floats where the GPU has room (pinned_snapshot.h);
// otherwise leaves it empty and says why. Not an error either way: the copy then goes straight
// to pinned memory.
Status PinnedSnapshot::stage_on_device(size_t need) {
  if (how_.staging == SnapshotStaging::host) {
    off_reason_ = "SAL_SNAPSHOT_STAGING=host";
    return {};
  }
  if (spare_.size() >= need || (refused_at_ != 0 && need >= refused_at_)) return {};
  // The old spare may still be read by another slot's copy to the host.
  SAL_GPU_TRY(kc::cuda_status(int(cudaStreamSynchronize(stream_)), "cudaStreamSynchronize (snapshot copy stream)"));
  spare_.reset();
  size_t free_b = 0, total_b = 0;
  SAL_GPU_TRY(kc::cuda_status(int(cudaMemGetInfo(&free_b, &total_b)), "cudaMemGetInfo (snapshot staging)"));
  const size_t bytes = need * sizeof(float), keep = std::max(total_b / 10, kMinFreeBytes);
  if (free_b < bytes + keep) {
    refused_at_ = need;
    off_reason_ = "staging needs " + gib(bytes) + " of device memory and would leave " +
                  gib(free_b > bytes ? free_b - bytes : 0) + " of " + gib(total_b) + " free (at least " + gib(keep) +
                  " must stay)";
    return {};
  }
  if (kc::Status a = spare_.allocate(need); !a.ok()) {
    (void)cudaGetLastError();  // a failed cudaMalloc is not sticky; clear it for the next check
    refused_at_ = need;
    off_reason_ = std::string("staging: ") + a.what();
    return {};
  }
  off_reason_.clear();
  return {};
}

// taken on the training stream -> the copy stream waits -> (into the spare -> staged_on_device,
// which the next write of p's values waits for -> the copy to the pinned memory: here in one, or
// paced by finish()) or (each unit to the pinned memory) -> copied (the last being what the next
// write waits for).
Status PinnedSnapshot::enqueue(DeviceParams& p, const std::vector<DeviceUnit*>& units, int slot, size_t need,
                               bool staged) {
  Shared::Slot& s = shared_->slots[slot];
  SAL_GPU_TRY(kc::cuda_status(int(cudaEventRecord(taken_->get(), p.context().stream())),
                              "cudaEventRecord (snapshot taken)"));
  SAL_GPU_TRY(kc::cuda_status(int(cudaStreamWaitEvent(stream_, taken_->get(), 0)),
                              "cudaStreamWaitEvent (the snapshot's copy waits for the step)"));
  float* dst = staged ? spare_.get() : s.pinned;
  const cudaMemcpyKind kind = staged ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
  for (size_t i = 0; i < units.size(); ++i) {
    const DeviceUnit& u = *units[i];
    const float* src[3] = {u.w.get(), u.m.get(), u.v.get()};
    for (int k = 0; k < 3 && u.size > 0; ++k)
      SAL_GPU_TRY(copy_async(dst + s.staged[i].offset + size_t(k) * u.size, src[k], u.size, kind, stream_,
                             staged ? "cudaMemcpyAsync (snapshot into device staging)"
                                    : "cudaMemcpyAsync (snapshot to pinned memory)"));
  }
  if (staged) {
    SAL_GPU_TRY(kc::cuda_status(int(cudaEventRecord(s.staged_on_device->get(), stream_)),
                                "cudaEventRecord (snapshot staged on the device)"));
    p.add_reader(s.staged_on_device);
    if (how_.chunk_bytes > 0) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      s.from = spare_.get();
      s.to_drain = need;
      shared_->spare_slot = slot;
      return {};  // finish() copies it to the host and records `copied`
    }
    SAL_GPU_TRY(copy_async(s.pinned, spare_.get(), need, cudaMemcpyDeviceToHost, stream_,
                           "cudaMemcpyAsync (snapshot staging to pinned memory)"));
  }
  SAL_GPU_TRY(kc::cuda_status(int(cudaEventRecord(s.copied->get(), stream_)), "cudaEventRecord (snapshot copied)"));
  if (!staged) p.add_reader(s.copied);
  return {};
}

// A staged, paced slot's copy from the spare buffer to the pinned memory: one chunk in flight at a
// time, so that another stream's small copies wait behind a chunk at most (pinned_snapshot.h).
// Frees the spare buffer for the next snapshot either way.
kc::Status PinnedSnapshot::drain(int slot) {
  Shared::Slot& s = shared_->slots[slot];
  const size_t total = s.to_drain, step = std::max<size_t>(1, how_.chunk_bytes / sizeof(float));
  kc::Status st;
  for (size_t at = 0; at < total && st.ok(); at += step) {
    st = copy_async(s.pinned + at, s.from + at, std::min(step, total - at), cudaMemcpyDeviceToHost, stream_,
                    "cudaMemcpyAsync (snapshot staging to pinned memory, a chunk)");
    if (st.ok()) st = kc::cuda_status(int(cudaEventRecord(s.copied->get(), stream_)), "cudaEventRecord (a chunk)");
    if (st.ok()) st = kc::cuda_status(int(cudaEventSynchronize(s.copied->get())), "waiting for a chunk's copy");
  }
  if (total > 0 && !st.ok()) (void)cudaStreamSynchronize(stream_);  // nothing reads the spare after this
  std::lock_guard<std::mutex> lock(shared_->mu);
  forget_spare(slot);
  return st;
}

Result<UnitViews> PinnedSnapshot::finish(uint64_t ticket) {
  int slot = -1;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (int i = 0; i < kSlots; ++i)
      if (shared_->slots[i].ticket == ticket && shared_->slots[i].state == Shared::State::copying) slot = i;
    if (slot < 0) return fail("snapshot: no snapshot ", ticket, " in flight to finish");
    shared_->slots[slot].state = Shared::State::taking;
  }
  Shared::Slot& s = shared_->slots[slot];
  // This thread (the snapshot writer's) may never have used the device: make it current first.
  kc::Status waited = kc::cuda_status(int(cudaSetDevice(device_)), "cudaSetDevice (snapshot writer)");
  if (waited.ok()) waited = drain(slot);
  if (waited.ok())
    waited = kc::cuda_status(int(cudaEventSynchronize(s.copied->get())), "waiting for the snapshot's copy");
  if (!waited.ok()) {
    (void)cudaStreamSynchronize(stream_);
    release(slot);
    return Error(waited.what());
  }
  UnitViews out;
  out.units.reserve(s.staged.size());
  for (const Shared::Staged& st : s.staged) {
    const float* w = s.pinned + st.offset;
    out.units.push_back(UnitView{st.id, w, w + st.size, w + 2 * st.size, st.size});
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    s.state = Shared::State::lent;
  }
  out.keep = std::make_shared<Lease>(shared_, slot);
  return out;
}

}  // namespace sal::model

// pinned_snapshot.h — snapshots of a GPU's units (values and both Adam moments) taken while
// training goes on. begin() (on the training thread, between steps) records an event on the
// Context's stream and makes a copy stream of its own wait for it, so the copy sees every update
// enqueued so far, then copies:
//
//   - staged on the device (the default, when the GPU has room): every unit into one spare device
//     buffer at HBM speed (by the bandwidth about a millisecond for gpu_quickstart's 1.9 GB), an
//     event the next optimizer update waits for (DeviceParams::add_reader), then that buffer to
//     pinned host memory while the next steps run. The update waits for the device-to-device copy
//     only. The copy to the host is paced (SAL_SNAPSHOT_CHUNK_MB, 8 by default): finish() issues it
//     in chunks, one in flight at a time, so the training step's own small device-to-host copies
//     (the loss, the counts, the norms) wait behind one chunk (0.2 ms over PCIe) instead of the
//     whole snapshot (about 40 ms for 1.9 GB: the step at each snapshot took that much longer,
//     staged or not, on the H200 on 2026-11-30). With SAL_SNAPSHOT_CHUNK_MB=0 begin() enqueues the
//     whole copy at once, as before. While one slot's units wait in the spare buffer for finish(),
//     a snapshot begun in the other slot goes straight to pinned memory.
//     Cost: 12 bytes of device memory per parameter snapshotted. Off when SAL_SNAPSHOT_STAGING=host,
//     or when taking it would leave the GPU less than a tenth of its memory (or 2 GiB) free; the
//     snapshot then copies each unit straight to pinned memory, and the update waits for that
//     (about 40 ms for 1.9 GB over PCIe).
//   - straight to pinned host memory otherwise.
//
// finish(ticket) (on any thread: the snapshot writer's) waits for that snapshot's copy and lends
// the pinned memory as views (model::UnitViews) until they are dropped: the writer writes from the
// pinned memory itself, with no copy into host vectors. Two slots of pinned memory, so a write
// that is still going on when the next snapshot is due does not hold that one up; a third waits
// (begin() refuses while both are held; runtime::OnDevice waits for a slot first). Slot 0's pinned
// memory is allocated by reserve() or the first begin(); slot 1's when a snapshot first finds slot
// 0 held. Each only grows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/cuda/device_params.h"
#include "model/params.h"

namespace sal::model {

// Where a snapshot is staged before host memory, and how the staged copy reaches the host (above).
enum class SnapshotStaging { automatic, host };
struct SnapshotCopy {
  static constexpr size_t kDefaultChunkBytes = size_t(8) << 20;
  SnapshotStaging staging = SnapshotStaging::automatic;
  size_t chunk_bytes = kDefaultChunkBytes;  // the paced copy's chunk; 0: one copy enqueued by begin()
};
// SAL_SNAPSHOT_STAGING ("auto", the default, or "host") and SAL_SNAPSHOT_CHUNK_MB (a whole number of
// MB, 0 to 4096; 8 by default); an error names the variable and what it takes.
Result<SnapshotCopy> snapshot_copy_from_env();

class PinnedSnapshot {
 public:
  static constexpr int kSlots = 2;

  // The copy stream and events on ctx's device. The Context must outlive the object.
  static Result<std::unique_ptr<PinnedSnapshot>> create(const kc::Context& ctx, SnapshotCopy how = {});
  // Waits for the copies in flight, then lets go of the stream and the device staging buffer. The
  // pinned memory of a slot still lent (views not yet dropped) goes when they are.
  ~PinnedSnapshot();
  PinnedSnapshot(const PinnedSnapshot&) = delete;
  PinnedSnapshot& operator=(const PinnedSnapshot&) = delete;

  // Makes slot 0's pinned memory hold at least `floats` floats (3 per parameter). Does nothing
  // while that slot is in use (begin() grows it if it must).
  Status reserve(size_t floats);
  // Enqueues the copies of the values and moments of the units `ids` of p (every unit of p when
  // empty), as they are after the work enqueued so far on p's stream, into a free slot, and returns
  // the snapshot's ticket. Does not wait for the device. Fails (nothing enqueued) for an id p does
  // not hold, or when no slot is free.
  Result<uint64_t> begin(DeviceParams& p, const std::vector<UnitId>& ids);
  // Waits for the copies of `ticket` (a staged one's paced copy to the host is issued here), then
  // returns its units in begin()'s order as views into the pinned memory, lent until the views'
  // keep is dropped (the slot is then free). A failure frees the slot at once. Any thread, once per
  // ticket.
  Result<UnitViews> finish(uint64_t ticket);

  int in_flight() const;  // slots begun and not yet free
  size_t pinned_bytes() const;
  // Device memory held for staging (0: the copies go straight to pinned memory), and why it is
  // off when it is ("" while on or before the first snapshot).
  size_t staging_bytes() const;
  size_t chunk_bytes() const { return how_.chunk_bytes; }  // the staged copy's pace (0: one copy)
  std::string staging_off_reason() const;

 private:
  struct Shared;
  class Lease;
  PinnedSnapshot(int device, cudaStream_t stream, SnapshotCopy how, std::shared_ptr<GpuEvent> taken,
                 std::shared_ptr<Shared> shared)
      : device_(device), stream_(stream), how_(how), taken_(std::move(taken)), shared_(std::move(shared)) {}
  Status stage_on_device(size_t need);
  Status enqueue(DeviceParams& p, const std::vector<DeviceUnit*>& units, int slot, size_t need, bool staged);
  kc::Status drain(int slot);
  void forget_spare(int slot);
  void release(int slot);

  int device_;
  cudaStream_t stream_;
  SnapshotCopy how_;
  std::shared_ptr<GpuEvent> taken_;  // recorded on the training stream at begin(); the copy stream waits for it
  std::shared_ptr<Shared> shared_;  // the slots, shared with the leases finish() hands out
  // Training thread only (begin): the device staging buffer and why it is off.
  kc::Buffer<float> spare_;
  std::string off_reason_;
  size_t refused_at_ = 0;  // the size staging was last refused for (not tried again below it)
};

}  // namespace sal::model

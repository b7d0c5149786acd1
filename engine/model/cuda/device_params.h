// device_params.h — a worker's model::Params on one GPU. Every unit the host form holds (embedding,
// per layer dense and gate, the held experts) lives on the device as four fp32 buffers of the
// unit's flat length — values, gradient, Adam's m and v, in params.h's layout, so a model::Slice
// addresses the same tensor on either side — plus, for the units whose matrices feed bf16 GEMMs, a
// bf16 copy of the values (the whole unit, same offsets), made by refresh_bf16() after every
// optimizer step. Those units are the dense ones (w_qkv, w_o) and the experts (w1, w2); the
// embedding gets one only when the LM head runs in bf16 (see LmHead). The gate stays fp32: its
// GEMM is tiny, and bf16 could flip top-k choices against the CPU.
//
// The host form stays the reference for everything that leaves the device: checkpoints and
// migration download values and moments into a model::Params (or one model::Unit) and upload them
// back. Those copies are synchronous (they wait for the Context's stream, then copy on it) and meant
// for set-up, checkpoints and tests. Snapshots taken while training goes on use PinnedSnapshot
// (pinned_snapshot.h): its own stream, and an event the next change of the values waits for on
// the device (DeviceParams::fence_writes).
//
// Also here, shared by the files of engine/model/cuda: the conversion of a kernels::cuda::Status
// into the engine's sal::Status, and `ensure`, which grows a device buffer.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/result.h"
#include "kernels/cuda/buffer.h"
#include "kernels/cuda/context.h"
#include "model/params.h"

// Return early from a function returning sal::Status / sal::Result<T> when a kernels::cuda call
// failed; the error carries the kernel's own message.
#define SAL_GPU_TRY(expr)                                               \
  do {                                                                  \
    ::sal::kernels::cuda::Status sal_gpu_s_ = (expr);                   \
    if (!sal_gpu_s_.ok()) return ::sal::Error(sal_gpu_s_.what());       \
  } while (0)

namespace sal::model {

namespace kc = sal::kernels::cuda;

// A kernels::cuda::Status as the engine's Status.
inline Status gpu_status(const kc::Status& s) {
  if (s.ok()) return {};
  return Error(s.what());
}

// Makes b hold at least max(n, 1) elements (never null, so an empty batch still has valid
// pointers). Growing first waits for ctx's stream: nothing in flight may still use the old memory.
template <class T>
kc::Status ensure(const kc::Context& ctx, kc::Buffer<T>& b, size_t n) {
  n = n == 0 ? 1 : n;
  if (b.size() >= n) return {};
  SAL_CUDA_TRY(ctx.synchronize());
  return b.allocate(n);
}

// Enqueued copies on ctx's stream from a host vector to device memory and from device memory to a
// host array; the error names `what`. (Pageable host memory: cudaMemcpyAsync has copied the
// source out when it returns; a download has landed once the stream is synchronised.)
template <class T>
kc::Status upload_async(const kc::Context& ctx, T* dst, const std::vector<T>& src, const char* what) {
  if (src.empty()) return {};
  return kc::cuda_status(
      int(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, ctx.stream())), what);
}
template <class T>
kc::Status download_async(const kc::Context& ctx, T* dst, const T* src, size_t n, const char* what) {
  if (n == 0) return {};
  return kc::cuda_status(int(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToHost, ctx.stream())), what);
}

// Precision of the tied LM head (logits = xf tok^T and its two gradient products). fp32 is exact
// against the CPU and cheap at byte-level vocabularies; at tens of thousands of tokens it would
// cost as much as the rest of the model, so bf16 is the automatic choice above kF32HeadMaxVocab.
enum class LmHead { automatic, f32, bf16 };
constexpr int kF32HeadMaxVocab = 1024;

// Which parts of a unit a copy moves (a bit set).
enum UnitParts : unsigned { kValues = 1u, kGrads = 2u, kMoments = 4u, kAllParts = 7u };

// A CUDA event owned by a value. Shared, because a DeviceParams keeps the event of a snapshot's
// copy (PinnedSnapshot) alive for as long as its next write must wait for it. Created with
// cudaEventDisableTiming | cudaEventBlockingSync: a host waiting for it sleeps rather than spins
// (the snapshot writer's thread waits for a copy of ~100 ms beside the training thread).
class GpuEvent {
 public:
  static Result<std::shared_ptr<GpuEvent>> create();
  ~GpuEvent();
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  GpuEvent() = default;
  cudaEvent_t e_ = nullptr;
};

// One unit on the device. Tensors are addressed with the host layout's slices.
struct DeviceUnit {
  UnitId id;
  size_t size = 0;                    // floats in each buffer
  kc::Buffer<float> w, g, m, v;       // values, gradient, Adam moments
  kc::Buffer<kc::Bf16> w16;           // bf16 copy of w (same offsets), or empty
  // A frozen unit (the replay of a sparse window, model::Unit::frozen) runs forward and passes its
  // input gradient on as any other; its weight gradient is computed but left out of the norm and
  // the update (OptimizerCuda), which is what the CPU's not computing it amounts to.
  bool frozen = false;

  float* at(Slice s) const { return w.get() + s.offset; }
  float* grad(Slice s) const { return g.get() + s.offset; }
  const kc::Bf16* at16(Slice s) const { return w16.get() + s.offset; }
  bool has_bf16() const { return w16.size() != 0; }
};

class DeviceParams {
 public:
  // Uploads every unit of `host` (values and moments; gradients start at zero) and makes the bf16
  // copies. The Context must outlive the object.
  static Result<std::unique_ptr<DeviceParams>> create(const kc::Context& ctx, const Params& host,
                                                      LmHead head = LmHead::automatic);

  const Dims& dims() const { return dims_; }
  const kc::Context& context() const { return ctx_; }
  // True when the LM head runs in bf16 (the embedding unit then has a bf16 copy).
  bool bf16_head() const { return bf16_head_; }

  DeviceUnit& embedding() { return *embedding_; }
  DeviceUnit& dense(int layer) { return *dense_[size_t(layer)]; }
  DeviceUnit& gate(int layer) { return *gate_[size_t(layer)]; }
  DeviceUnit* expert(int layer, int e);  // null when not held
  // Every unit, in Params::units()'s order (embedding, per layer dense and gate, experts by key).
  std::vector<DeviceUnit*> units();
  // units() without the experts, as Params::non_expert_units().
  std::vector<DeviceUnit*> non_expert_units();
  std::vector<std::pair<int, int>> held_experts() const;
  size_t parameter_count() const;

  // Copies `parts` of every unit between the host form and the device. Both sides must hold the
  // same units (same expert set) of the same dims. Synchronous.
  Status upload(const Params& host, unsigned parts = kValues | kMoments);
  Status download(Params& host, unsigned parts = kValues | kMoments);
  // One unit (the device unit with u.id / id must exist). Synchronous. Uploading values refreshes
  // that unit's bf16 copy and takes the host unit's frozen flag.
  Status upload_unit(const Unit& u, unsigned parts);
  Status download_unit(const UnitId& id, Unit& out, unsigned parts);

  // Migration: an expert unit arriving (values and moments from `u`, zero gradient) or leaving.
  Status add_expert(const Unit& u);
  void remove_expert(int layer, int e);
  // The unit with this id, or null.
  DeviceUnit* find(const UnitId& id);

  // Another stream reads the values and moments until `done` has completed (a snapshot's copy to
  // host memory). The next change of them waits for it: on the device in fence_writes(), on the
  // host before their memory is freed or uploaded into.
  void add_reader(std::shared_ptr<GpuEvent> done);
  // Makes the Context's stream wait (cudaStreamWaitEvent: the host does not wait) for the readers
  // added since the last fence. Whatever changes values or moments on the stream (the optimizer's
  // AdamW) calls it first; later work on the stream is ordered after it.
  Status fence_writes();
  // Waits on the host for those readers (before freeing or uploading into the units' memory).
  Status wait_readers();

  // Zeroes every gradient (enqueued on the stream).
  Status zero_grads();
  // Re-makes the bf16 copies from the fp32 values (enqueued on the stream): after every change of
  // the values (optimizer step, upload).
  Status refresh_bf16();

  // Waits for the stream and for the readers (add_reader) before the memory goes.
  ~DeviceParams();
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;

 private:
  DeviceParams(const kc::Context& ctx, const Dims& d, bool bf16_head) : ctx_(ctx), dims_(d), bf16_head_(bf16_head) {}
  Result<std::unique_ptr<DeviceUnit>> make_unit(const Unit& u);
  bool wants_bf16(UnitKind k) const;

  const kc::Context& ctx_;
  Dims dims_;
  bool bf16_head_ = false;
  std::unique_ptr<DeviceUnit> embedding_;
  std::vector<std::unique_ptr<DeviceUnit>> dense_, gate_;
  std::map<std::pair<int, int>, std::unique_ptr<DeviceUnit>> experts_;
  // Every reader's event (each once: a snapshot re-records the same event, and a wait takes its
  // latest recording), and those the stream has not been made to wait for since.
  std::vector<std::shared_ptr<GpuEvent>> readers_, unfenced_;
};

}  // namespace sal::model

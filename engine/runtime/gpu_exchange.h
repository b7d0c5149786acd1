// gpu_exchange.h — a GPU worker in a plan of several ranks: the model::DeviceExchange that sends
// its tokens to the experts' ranks, and the gradient synchronisation and norm that go with it.
// Two ways to move the rows and gradients:
// - staged (no device plane): over the plan's Gloo data plane through pinned host buffers. This
//   is how several workers share one GPU (NCCL refuses two ranks on one device), and how a GPU
//   worker joins a plan with CPU workers.
// - direct: over a device data plane (comm::NcclCollectives, whose calls take device pointers),
//   device to device, when every rank has a GPU of its own (device_compute.h).
// Either way the host values (the counts' all-gather, the statistics, the norm) go over the host
// plane, and the collectives come in the same order with the same sizes.
//
// PlanDeviceExchange is runtime::DistributedExchange (distributed_exchange.h) with the experts on the device:
// the same collectives in the same order with the same sizes (gather_schedule's all-gather of E
// uint32 counts and the replica table's digest, then per forward and per backward two all-to-all-v
// of rows * d floats), the same schedule (runtime::flexible_dispatch on the all-gathered counts: the
// reference integers, on the host), the
// same packing order (destination-major, then expert, then the tokens' slot order), and several
// replicas of an expert on one rank are one unit with more capacity. So a GPU rank and a CPU rank
// in the same plan exchange rows with each other and compute the same thing (up to the experts'
// bf16 GEMM operands). Per forward, on the Context's stream:
//   counts down (r.counts) -> all-gather -> schedule -> send matrix up -> permute_rows + permute
//   into the send buffer -> down -> all-to-all-v -> up (rows arrive source by source, expert by
//   expert within a source) -> regroup into one block per held expert (permute with k = 1 over a
//   row map built on the host) -> expert_mlp_forward -> regroup back -> down -> all-to-all-v back
//   -> up into the send layout -> unpermute_combine.
// The backward is the mirror: unpermute_combine_backward -> the output gradients through the same
// exchange -> expert_mlp_backward (accumulating the held experts' weight gradients) -> the input
// gradients back -> permute_backward.
//
// The host waits for the stream before every collective (the counts and the rows must be on the
// host, or, direct, written before another stream reads them): three waits per forward (the
// counts, two all-to-alls), two per backward; a device plane's call returns once its work is
// complete, so the kernels after it read finished rows. Host staging is pinned memory
// (cudaMallocHost) that only grows and is shared by the layers (none when direct); what a layer's
// backward needs (schedule, row maps, expert outputs and saved activations) is kept per layer.
//
// Errors: every failed Status comes back with the layer and phase ("layer 2 forward: all-to-all
// of the tokens: ..."); an expert with tokens and no replica anywhere fails the dispatch on every
// rank alike, naming the expert; rows scheduled to this rank for an expert it does not hold fail
// here, naming it. After an error the Collectives object is spent (collectives.h) and the step is
// discarded. Never throws.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "kernels/cuda/buffer.h"
#include "model/cuda/device_exchange.h"
#include "model/cuda/device_params.h"
#include "runtime/dispatch.h"
#include "runtime/expert_grads.h"

namespace sal::runtime {

// Pinned host memory (cudaMallocHost) that only grows; its contents do not survive a growth.
// Copies to and from it may be asynchronous: reserve() waits for ctx's stream before it frees the
// old memory, and the owner must not write to it while a copy from it may still be in flight.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Makes the memory hold at least max(bytes, 1) bytes.
  Status reserve(const kernels::cuda::Context& ctx, size_t bytes);
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

class PlanDeviceExchange final : public model::DeviceExchange {
 public:
  // comm: this plan epoch's (host) data plane; this rank is comm.rank() of comm.size().
  // device_plane: null (staged through the host over comm), or the plan's device data plane, of
  // the same ranks, whose calls take device pointers (direct). replicas[layer] = R[e][rank], the
  // replica units of each expert on each rank (as DistributedExchange takes it). p holds this
  // rank's experts; comm, device_plane and p must outlive the exchange. Expert GEMMs as
  // LocalDeviceExchange: as `mode` says (grouped and fused when d % 8 == 0, per expert otherwise).
  PlanDeviceExchange(comm::Collectives& comm, comm::Collectives* device_plane, model::DeviceParams& p,
                     std::vector<Counts> replicas,
                     kernels::cuda::GroupedGemmMode mode = kernels::cuda::GroupedGemmMode::per_group);
  // Waits for the stream (copies from the staging memory may be in flight).
  ~PlanDeviceExchange() override;
  PlanDeviceExchange(const PlanDeviceExchange&) = delete;
  PlanDeviceExchange& operator=(const PlanDeviceExchange&) = delete;

  // All-reduce of the host values, as DistributedExchange::global_stats.
  Status global_stats(int layer, std::vector<double>& counts, std::vector<double>& prob_sums,
                      double& tokens) override;
  Status forward(int layer, const model::DeviceRouting& r, const float* x, float* out) override;
  Status backward(int layer, const model::DeviceRouting& r, const float* d_out, float* dx, float* d_w) override;

  // Each rank's weight in the dispatch (the step's shares; empty: even), as DistributedExchange's.
  std::vector<uint32_t> weights;
  Split split = Split::even;  // as DistributedExchange's
  // Called before every all-to-all (a drill's fault point), as DistributedExchange's.
  std::function<void()> before_alltoall;

  // Pinned host memory held for staging (bytes).
  size_t staging_bytes() const { return out_.bytes() + in_.bytes(); }

 private:
  // What one layer's backward needs from its forward.
  struct Layer {
    int tokens = -1, k = 0;                  // tokens -1: no forward has succeeded
    DispatchSchedule schedule;
    std::vector<int64_t> send_floats, recv_floats;  // per rank: this rank's all-to-all sizes (rows * d)
    std::vector<int> rows;                   // per expert: the rows computed here (quota[e][me])
    size_t received = 0;                     // rows received (= sum of rows)
    kernels::cuda::Buffer<int32_t> slot_rows;  // [tokens*k] each assignment's send-buffer row
    kernels::cuda::Buffer<int32_t> group;      // [received] each received row's row in the per-expert blocks
    kernels::cuda::Buffer<float> y;            // [tokens*k, d] the experts' outputs, send-buffer layout
    kernels::cuda::Buffer<kernels::cuda::Bf16> x16;  // [received, d] expert inputs (bf16), per-expert blocks
    kernels::cuda::Buffer<float> h;            // [received, expert_hidden_floats] pre-activations, per-expert blocks
  };

  Status check(const char* fn, int layer, const model::DeviceRouting& r) const;
  Status run_forward(int layer, const model::DeviceRouting& r, const float* x, float* out);
  Status run_backward(int layer, const model::DeviceRouting& r, const float* d_out, float* dx, float* d_w);
  // The schedule of `layer` from this rank's counts: all-gather, dispatch, the held experts' rows,
  // the all-to-all sizes and the regrouping map (host), into s.
  Status schedule(int layer, Layer& s, size_t assignments);
  // Device rows `from` (send_floats[i] floats for rank i, packed) go to the other ranks (through
  // the host, or over the device plane); what they send back lands in `to` (recv_floats[i] from
  // rank i, packed). Waits for the stream.
  Status swap(const float* from, const std::vector<int64_t>& send_floats, float* to,
              const std::vector<int64_t>& recv_floats, const char* what);
  kernels::cuda::GroupedGemmMode gemm_mode() const;

  comm::Collectives& comm_;
  comm::Collectives* device_plane_;  // null: staged
  model::DeviceParams& p_;
  const kernels::cuda::Context& ctx_;
  std::vector<Counts> replicas_;
  kernels::cuda::GroupedGemmMode mode_;
  std::map<int, Layer> layers_;
  // Scratch shared by the layers (dead between calls).
  kernels::cuda::Buffer<uint32_t> send_matrix_;
  kernels::cuda::Buffer<char> permute_ws_, mlp_scratch_;
  kernels::cuda::Buffer<float> slot_buf_;              // [tokens*k, d] send-buffer layout
  kernels::cuda::Buffer<float> recv_buf_;              // [received, d] as received
  kernels::cuda::Buffer<float> block_in_, block_out_;  // [received, d] per-expert blocks
  std::vector<uint32_t> counts_host_, send_host_;
  std::vector<int32_t> group_host_;
  PinnedStaging out_, in_;  // staged: host side of every all-to-all, what goes out and what comes in
};

// The gradient synchronisation of a GPU rank in a plan of several ranks: what
// Trainer::sync_gradients does on a CPU rank, collective for collective, so GPU and CPU ranks can
// share a plan. Every non-expert unit's gradient (the embedding, then per layer the dense unit and
// the gate, concatenated in that order) is summed over every rank with one all-reduce; then each
// expert of `shared` is summed among its holders only (reduce_among_holders). Staged, both go
// through the host (pinned memory for the all-reduce, host copies of the held shared experts'
// gradients); direct, over the device plane on device memory (the holders' sums with the add
// kernel, in rank order from +0 as on the host, so the bits match a CPU root's). Waits for the
// device. Does nothing with one rank.
class PlanGradientSync {
 public:
  // p (and device_plane, when given: direct) must outlive the object.
  explicit PlanGradientSync(model::DeviceParams& p, comm::Collectives* device_plane = nullptr)
      : p_(p), device_plane_(device_plane) {}
  // Waits for the stream (the last upload may read the staging memory).
  ~PlanGradientSync();
  PlanGradientSync(const PlanGradientSync&) = delete;
  PlanGradientSync& operator=(const PlanGradientSync&) = delete;

  // me = comm.rank(); shared = shared_experts(replicas) of the plan. comm is the host plane (used
  // when staged).
  Status sync(comm::Collectives& comm, const std::vector<SharedExpert>& shared);

 private:
  Status sync_staged(comm::Collectives& comm, const std::vector<SharedExpert>& shared);
  Status sync_direct(comm::Collectives& plane, const std::vector<SharedExpert>& shared);

  model::DeviceParams& p_;
  comm::Collectives* device_plane_;
  PinnedStaging staging_;
  model::Params experts_;  // staged: host copies of the gradients of the shared experts held here (g only)
  kernels::cuda::Buffer<float> dense_, inbox_, sum_;  // direct: the dense all-reduce, the roots' parts and sums
};

// The global gradient norm as Trainer::global_norm computes it on a CPU rank, with the same one
// all-reduce (a double, when comm has more than one rank): every non-expert unit's sum of squares
// (final after the sync, the same on every rank) plus each expert's divided by its number of
// holders, summed over ranks. ids and sums are parallel (DeviceParams::units() and
// OptimizerCuda::unit_grad_sum_squares(), after PlanGradientSync::sync).
Result<double> global_grad_norm(comm::Collectives& comm, const std::vector<model::UnitId>& ids,
                                const std::vector<double>& sums, const std::vector<Counts>& replicas);

}  // namespace sal::runtime

// gpu_backend.cpp — see gpu_backend.h. The model, exchange and optimizer refer to the DeviceParams,
// which refers to the Context: they are made after it and dropped before it (member order), and
// every load() remakes all three on the new DeviceParams. The exchange and the gradient sync
// follow the plan: load() makes the exchange local (one rank), set_plan() makes it a
// PlanDeviceExchange over the plan's Collectives when there are several ranks, with a
// PlanGradientSync; both refer to that Collectives, which the Trainer keeps alive until the next
// load() or set_plan() (device_compute.h), and both are dropped before the DeviceParams. When the
// plan names a device data plane, set_plan() connects it (NcclCollectives) or keeps the one it
// holds (the same ranks on the same GPUs), and both move their rows and gradients over it. The
// plane refers to nothing of the model: it outlives set_plan({}) and load() while it is ready, and
// one that is not (aborted, failed) is dropped before the exchange's buffers are freed, aborting
// NCCL work a failed call may have left running on them. The
// snapshot staging (PinnedSnapshot: copy stream, events, the spare device buffer, pinned host
// memory) lives as long as the object, across loads, so its memory is allocated once; a
// DeviceParams dropped while a snapshot's copy still reads it waits for the copy first
// (~DeviceParams), and pinned memory the writer still writes from stays until it is done.
#include "runtime/gpu_backend.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "comm/nccl_collectives.h"
#include "core/clock.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device.h"
#include "model/cuda/device_exchange.h"
#include "model/cuda/device_params.h"
#include "model/cuda/pinned_snapshot.h"
#include "model/cuda/device_model.h"
#include "model/cuda/optimizer_cuda.h"
#include "runtime/gpu_exchange.h"

namespace sal::runtime {
namespace {

namespace kc = kernels::cuda;

model::Unit* host_unit(model::Params& p, const model::UnitId& id) {
  switch (id.kind) {
    case model::UnitKind::embedding: return &p.embedding;
    case model::UnitKind::dense:
      return id.layer >= 0 && size_t(id.layer) < p.dense.size() ? &p.dense[size_t(id.layer)] : nullptr;
    case model::UnitKind::gate:
      return id.layer >= 0 && size_t(id.layer) < p.gate.size() ? &p.gate[size_t(id.layer)] : nullptr;
    case model::UnitKind::expert: return p.expert(id.layer, id.expert);
  }
  return nullptr;
}

class GpuCompute final : public DeviceCompute {
 public:
  GpuCompute(std::unique_ptr<kc::Context> ctx, std::unique_ptr<model::PinnedSnapshot> snapshot, std::string name,
             std::string key, const DeviceOptions& options, kc::GroupedGemmMode gemm_mode)
      : ctx_(std::move(ctx)), snapshot_(std::move(snapshot)), name_(std::move(name)), key_(std::move(key)),
        optim_(options.optim), snapshots_(options.snapshots), gemm_mode_(gemm_mode) {}
  // The worker may drop its Trainer on another thread than the training one: make this GPU current.
  ~GpuCompute() override {
    (void)cudaSetDevice(ctx_->device());
    drop();
    drop_device_plane();
  }

  Status load(const model::Params& host, const std::vector<std::pair<int, int>>& held) override {
    drop();
    // The non-expert units go up with the DeviceParams, the held experts one by one from host
    // (so the experts are not copied on the host first).
    model::Params dense;
    dense.dims = host.dims;
    dense.embedding = host.embedding;
    dense.dense = host.dense;
    dense.gate = host.gate;
    auto p = model::DeviceParams::create(*ctx_, dense);
    if (!p) return p.error().with_context("uploading the model to " + name_);
    for (auto [l, e] : std::set<std::pair<int, int>>(held.begin(), held.end())) {
      auto it = host.experts.find({l, e});
      if (it == host.experts.end())
        return fail(name_, ": layer ", l, " expert ", e, " is to be loaded but the host does not hold it");
      if (auto s = (*p)->add_expert(it->second); !s) return s.error().with_context("uploading to " + name_);
    }
    params_ = std::move(*p);
    SAL_TRY(remake_model());
    spdlog::info("{}: {} parameters on the device ({} experts)", name_, params_->parameter_count(),
                 params_->held_experts().size());
    if (snapshots_) reserve_snapshot_memory();
    return {};
  }

  // The model, exchange and optimizer refer to the DeviceParams' units: they go first and are made
  // again on the units that stay and arrive.
  Status move_experts(const model::Params& host, const std::vector<std::pair<int, int>>& held) override {
    if (!params_) return load(host, held);
    int64_t t0 = mono_ns();
    if (ctx_) (void)ctx_->synchronize();
    release_plan();
    optimizer_.reset();
    model_.reset();
    const std::set<std::pair<int, int>> want(held.begin(), held.end());
    const auto had = params_->held_experts();
    size_t dropped = 0, added = 0;
    for (auto [l, e] : had) {
      if (want.count({l, e})) continue;
      params_->remove_expert(l, e);
      ++dropped;
    }
    for (auto [l, e] : want) {
      if (params_->expert(l, e)) continue;
      auto it = host.experts.find({l, e});
      if (it == host.experts.end())
        return fail(name_, ": layer ", l, " expert ", e, " is to be loaded but the host does not hold it");
      if (auto s = params_->add_expert(it->second); !s) return s.error().with_context("uploading to " + name_);
      ++added;
    }
    SAL_TRY(remake_model());
    spdlog::info("{}: {} experts kept on the device, {} uploaded, {} dropped in {:.1f} ms", name_,
                 had.size() - dropped, added, dropped, double(mono_ns() - t0) / 1e6);
    if (snapshots_) reserve_snapshot_memory();
    return {};
  }

  Status store(model::Params& host) override {
    if (!params_) return fail(name_, ": no parameters on the device to download");
    std::vector<model::UnitId> ids;
    for (model::DeviceUnit* u : params_->units()) ids.push_back(u->id);
    return store_units(host, ids);
  }

  Status store_units(model::Params& host, const std::vector<model::UnitId>& ids) override {
    if (!params_) return fail(name_, ": no parameters on the device to download");
    for (const model::UnitId& id : ids) {
      model::Unit* h = host_unit(host, id);
      if (!h) return fail(name_, ": the host has no unit ", id.name(), " to download into");
      if (auto s = params_->download_unit(id, *h, model::kValues | model::kMoments); !s)
        return s.error().with_context("downloading " + id.name() + " from " + name_);
    }
    return {};
  }

  Status upload_units(const model::Params& host, const std::vector<model::UnitId>& ids) override {
    if (!params_) return fail(name_, ": no parameters on the device to upload into");
    model::Params& h = const_cast<model::Params&>(host);  // host_unit() takes it mutable; nothing changes
    for (const model::UnitId& id : ids) {
      const model::Unit* u = host_unit(h, id);
      if (!u) return fail(name_, ": the host has no unit ", id.name(), " to upload");
      if (auto s = params_->upload_unit(*u, model::kValues | model::kMoments); !s)
        return s.error().with_context("uploading " + id.name() + " to " + name_);
    }
    return {};
  }

  Status set_plan(const DevicePlan& plan) override {
    release_plan();
    // set_plan({}) lets go of the plan only; a plan drops the plane unless it keeps it
    if (plan.comm && (plan.device_prefix.empty() || !plan.reuse_device_plane)) drop_device_plane();
    if (!params_) return plan.comm ? fail(name_, ": no parameters on the device to plan for") : Status{};
    if (!plan.comm || plan.comm->size() <= 1) {
      exchange_ = std::make_unique<model::LocalDeviceExchange>(*params_, gemm_mode_);
      return {};
    }
    comm::Collectives* device_plane = nullptr;
    if (!plan.device_prefix.empty()) {
      SAL_TRY(plan.reuse_device_plane ? keep_device_plane(plan) : connect_device_plane(plan));
      device_plane = nccl_.get();
    }
    // A grouped plan's tokens cross the group's plane (staged through the host), not the plan's.
    comm::Collectives& crossing = plan.group ? *plan.group : *plan.comm;
    if (crossing.size() <= 1) {
      exchange_ = std::make_unique<model::LocalDeviceExchange>(*params_, gemm_mode_);
    } else {
      auto ex = std::make_unique<PlanDeviceExchange>(crossing, plan.group ? nullptr : device_plane, *params_,
                                                     plan.group ? plan.group_replicas : plan.replicas, gemm_mode_);
      ex->before_alltoall = plan.before_alltoall;
      ex->split = plan.split;
      plan_exchange_ = ex.get();
      exchange_ = std::move(ex);
    }
    sync_ = std::make_unique<PlanGradientSync>(*params_, device_plane);
    comm_ = plan.comm;
    replicas_ = plan.replicas;
    return {};
  }

  std::string device_key() const override { return key_; }

  bool device_plane_ready() const override {
    auto n = std::atomic_load(&nccl_);
    return n && !n->aborted() && !n->outstanding_work();
  }

  void abort(const std::string& why) override {
    cancel_ = true;
    if (auto n = std::atomic_load(&nccl_)) n->abort(why);
  }
  void clear_abort() override { cancel_ = false; }

  Status sync_gradients(const std::vector<SharedExpert>& shared) override {
    if (!comm_) return {};
    return sync_gradients_over(*comm_, shared);
  }

  // Staged through the host unless comm is the plan's and the plan has a device plane (sync_ was
  // made with it).
  Status sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) override {
    if (!params_) return fail(name_, ": no parameters on the device");
    if (comm.size() <= 1) return {};
    if (!sync_ || &comm != comm_) {
      if (!host_sync_) host_sync_ = std::make_unique<PlanGradientSync>(*params_);
      if (auto s = host_sync_->sync(comm, shared); !s) return s.error().with_context(name_);
      return {};
    }
    if (auto s = sync_->sync(comm, shared); !s) return s.error().with_context(name_);
    return {};
  }

  Status zero_grads() override { return params_ ? params_->zero_grads() : Status{}; }

  Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) override {
    if (!model_ || !exchange_) return fail(name_, ": no model on the device");
    if (plan_exchange_) plan_exchange_->weights = b.rank_shares;
    auto stats = model_->step(b, global_tokens, *exchange_);
    if (!stats) return stats.error().with_context(name_);
    return stats;
  }

  // Each unit's sum of squares in double, added on the host in unit order (deterministic).
  Result<double> grad_norm() override {
    if (!optimizer_) return fail(name_, ": no model on the device");
    if (comm_) return grad_norm_over(*comm_, replicas_);
    auto sums = optimizer_->unit_grad_sum_squares();
    if (!sums) return sums.error().with_context(name_);
    double total = 0;
    for (double s : *sums) total += s;
    return std::sqrt(total);
  }

  Result<double> grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) override {
    if (!optimizer_) return fail(name_, ": no model on the device");
    auto sums = optimizer_->unit_grad_sum_squares();
    if (!sums) return sums.error().with_context(name_);
    std::vector<model::UnitId> ids;
    for (const model::DeviceUnit* u : params_->units()) ids.push_back(u->id);
    auto norm = global_grad_norm(comm, ids, *sums, replicas);
    if (!norm) return norm.error().with_context(name_ + ": global gradient norm");
    return norm;
  }

  // One device buffer of every unit's gradient, in units() order (enqueued on the stream).
  Status backup_grads() override {
    if (!params_) return fail(name_, ": no parameters on the device");
    size_t n = 0;
    for (const model::DeviceUnit* u : params_->units()) n += u->size;
    SAL_GPU_TRY(model::ensure(*ctx_, grad_backup_, n));
    SAL_TRY(copy_grads(true));
    backed_up_ = n;
    return {};
  }
  Status restore_grads() override {
    if (!params_) return fail(name_, ": no parameters on the device");
    size_t n = 0;
    for (const model::DeviceUnit* u : params_->units()) n += u->size;
    if (backed_up_ == 0 || backed_up_ != n) return fail(name_, ": no gradients of these units were set aside");
    return copy_grads(false);
  }

  // The update waits on the device for a snapshot's copy still reading the values (OptimizerCuda
  // fences its writes), not on the host.
  Status update(double lr, double grad_scale, int64_t t) override {
    if (!optimizer_) return fail(name_, ": no model on the device");
    if (auto s = optimizer_->apply_adamw(lr, grad_scale, t); !s) return s.error().with_context(name_);
    return {};
  }

  Result<uint64_t> begin_snapshot(const std::vector<model::UnitId>& ids) override {
    if (!params_) return fail(name_, ": no parameters on the device to snapshot");
    const size_t pinned = snapshot_->pinned_bytes();
    auto ticket = snapshot_->begin(*params_, ids);
    if (!ticket) return ticket.error().with_context(name_);
    say_staging(pinned);
    return ticket;
  }

  // On the snapshot writer's thread. snapshot_ is never replaced, and PinnedSnapshot keeps its own
  // state consistent between this thread and the training thread's begin/reserve.
  Result<model::UnitViews> finish_snapshot(uint64_t ticket) override {
    auto units = snapshot_->finish(ticket);
    if (!units) return units.error().with_context(name_);
    return units;
  }
  int snapshot_slots() const override { return model::PinnedSnapshot::kSlots; }

 private:
  // Pinned memory for a snapshot of every unit held (values and both moments), allocated now
  // rather than at the first snapshot, which would pause training for it (pinning ~2 GB takes
  // a good part of a second); only when the job takes snapshots. A failure is not the plan's: the
  // first snapshot tries again and fails with the reason.
  void reserve_snapshot_memory() {
    size_t floats = 3 * params_->parameter_count();
    if (snapshot_->pinned_bytes() >= floats * sizeof(float)) return;
    int64_t t0 = mono_ns();
    if (auto s = snapshot_->reserve(floats); !s) {
      spdlog::warn("{}: no pinned host memory for snapshots yet: {}", name_, s.error().message());
      return;
    }
    spdlog::info("{}: {:.0f} MB of pinned host memory for snapshots in {:.0f} ms", name_,
                 double(snapshot_->pinned_bytes()) / 1e6, double(mono_ns() - t0) / 1e6);
  }

  static std::string paced(size_t chunk_bytes) {
    if (chunk_bytes == 0) return "in one copy: SAL_SNAPSHOT_CHUNK_MB=0";
    return "in chunks of " + std::to_string(chunk_bytes >> 20) + " MB, one at a time";
  }

  // Says where snapshots are staged when that changes, and when a snapshot had to pin more host
  // memory (a second slot, or more units): both pause training once.
  void say_staging(size_t pinned_before) {
    const size_t staging = snapshot_->staging_bytes();
    const std::string off = snapshot_->staging_off_reason();
    if (staging != said_staging_ || off != said_off_) {
      if (staging > 0)
        spdlog::info("{}: snapshots staged in {:.0f} MB of device memory (12 bytes a parameter): an update "
                     "waits for a copy on the device, the copy to the host overlaps the next steps ({})",
                     name_, double(staging) / 1e6, paced(snapshot_->chunk_bytes()));
      else
        spdlog::info("{}: snapshots copied straight to pinned host memory, the next update waiting for it: {}",
                     name_, off);
      said_staging_ = staging, said_off_ = off;
    }
    if (snapshot_->pinned_bytes() > pinned_before)
      spdlog::info("{}: a snapshot pinned {:.0f} MB more host memory ({:.0f} MB in all): the previous one was "
                   "still being written", name_, double(snapshot_->pinned_bytes() - pinned_before) / 1e6,
                   double(snapshot_->pinned_bytes()) / 1e6);
  }

  // The plan's device data plane, rank comm->rank() of comm->size() on this GPU, through the store.
  // An abort() while it connects ends the connect (cancel_) or the plane it made.
  Status connect_device_plane(const DevicePlan& plan) {
    if (!plan.store) return fail(name_, ": device data plane '", plan.device_prefix, "' without a store");
    comm::NcclOptions o;
    o.rank = plan.comm->rank();
    o.size = plan.comm->size();
    o.device = ctx_->device();
    o.prefix = plan.device_prefix;
    o.cancel = &cancel_;
    int64_t t0 = mono_ns();
    auto c = comm::connect_nccl_object(o, *plan.store);
    if (!c) return c.error().with_context(name_ + ": device data plane '" + plan.device_prefix + "'");
    std::shared_ptr<comm::NcclCollectives> n(std::move(*c));
    std::atomic_store(&nccl_, n);
    if (cancel_) n->abort("aborted while the device data plane connected");
    spdlog::info("{}: NCCL device data plane '{}', rank {} of {}, in {:.0f} ms", name_, plan.device_prefix, o.rank,
                 o.size, double(mono_ns() - t0) / 1e6);
    return {};
  }

  // The plane the device holds, for a plan of the same ranks on the same GPUs (the Trainers agreed
  // every rank's is ready); it may have been aborted since.
  Status keep_device_plane(const DevicePlan& plan) {
    auto n = std::atomic_load(&nccl_);
    if (!device_plane_ready())
      return fail(name_, ": the device data plane to keep for '", plan.device_prefix, "' is ",
                  n ? "aborted or failed" : "gone");
    if (n->rank() != plan.comm->rank() || n->size() != plan.comm->size())
      return fail(name_, ": the device data plane '", n->prefix(), "' is rank ", n->rank(), " of ", n->size(),
                  ", the plan's rank ", plan.comm->rank(), " of ", plan.comm->size());
    spdlog::info("{}: keeps NCCL device data plane '{}' for '{}'", name_, n->prefix(), plan.device_prefix);
    return {};
  }

  // Drops the exchange and the gradient sync. A device data plane that is not ready is dropped
  // first, aborted if a failed call may still run NCCL kernels on the exchange's buffers (cudaFree
  // would wait behind a hung kernel); a ready one stays for the next plan to keep or drop.
  void release_plan() {
    if (!device_plane_ready()) drop_device_plane();
    sync_.reset();
    host_sync_.reset();
    plan_exchange_ = nullptr;
    exchange_.reset();
    comm_ = nullptr;
    replicas_.clear();
  }

  // Ends the device data plane: finalized when healthy, aborted otherwise (NcclCollectives::destroy).
  void drop_device_plane() {
    auto n = std::atomic_load(&nccl_);
    if (!n) return;
    std::atomic_store(&nccl_, std::shared_ptr<comm::NcclCollectives>());
    if (auto s = n->destroy(); !s) spdlog::warn("{}: {}", name_, s.error().message());
  }

  // Every unit's gradient into grad_backup_ (aside) or back from it, device to device.
  Status copy_grads(bool aside) {
    size_t at = 0;
    for (const model::DeviceUnit* u : params_->units()) {
      float* backup = grad_backup_.get() + at;
      SAL_GPU_TRY(kc::cuda_status(int(cudaMemcpyAsync(aside ? backup : u->g.get(), aside ? u->g.get() : backup,
                                                      u->size * sizeof(float), cudaMemcpyDeviceToDevice,
                                                      ctx_->stream())),
                                  aside ? "cudaMemcpyAsync (gradients aside)" : "cudaMemcpyAsync (gradients back)"));
      at += u->size;
    }
    return {};
  }

  // The family's model on params_, the local exchange and the optimizer; the plan's exchange
  // comes with set_plan().
  Status remake_model() {
    auto m = model::make_device_model(*params_);
    if (!m) return m.error().with_context(name_);
    model_ = std::move(*m);
    plan_exchange_ = nullptr;
    exchange_ = std::make_unique<model::LocalDeviceExchange>(*params_, gemm_mode_);
    comm_ = nullptr;
    replicas_.clear();
    optimizer_ = std::make_unique<model::OptimizerCuda>(*params_, optim_);
    backed_up_ = 0;
    return {};
  }

  // Frees the device state but a ready device data plane; waits first, since kernels in flight
  // may still use the memory (and ~DeviceParams waits for a snapshot's copy still reading it).
  void drop() {
    if (ctx_) (void)ctx_->synchronize();
    release_plan();
    optimizer_.reset();
    model_.reset();
    params_.reset();
  }

  std::unique_ptr<kc::Context> ctx_;
  std::unique_ptr<model::PinnedSnapshot> snapshot_;  // before params_: outlives every DeviceParams
  size_t said_staging_ = 0;                           // what say_staging() last said
  std::string said_off_;
  std::string name_;
  std::string key_;  // the GPU's UUID; empty with SAL_DEVICE_PLANE=host
  model::OptimConfig optim_;
  bool snapshots_;  // the job takes snapshots: reserve their pinned memory at every load
  kc::GroupedGemmMode gemm_mode_;  // how the expert MLPs issue their GEMMs (SAL_EXPERT_GEMM)
  std::unique_ptr<model::DeviceParams> params_;
  std::unique_ptr<model::DeviceModel> model_;
  std::unique_ptr<model::DeviceExchange> exchange_;  // local, or staged over comm_
  PlanDeviceExchange* plan_exchange_ = nullptr;       // exchange_ when it is the plan's (several ranks)
  std::unique_ptr<PlanGradientSync> sync_;          // with comm_ only
  std::unique_ptr<PlanGradientSync> host_sync_;     // staged, over a plane other than comm_ (a patch's)
  kc::Buffer<float> grad_backup_;                   // backup_grads(): every unit's gradient, units() order
  size_t backed_up_ = 0;                            // the floats set aside (0: none for these units)
  std::unique_ptr<model::OptimizerCuda> optimizer_;
  comm::Collectives* comm_ = nullptr;                 // the plan's host data plane, when it has several ranks
  std::vector<Counts> replicas_;                      // with comm_: the plan's R[layer][e][rank]
  // The plan's device data plane, when it has one; atomic access: abort() reads it from another thread.
  std::shared_ptr<comm::NcclCollectives> nccl_;
  std::atomic<bool> cancel_{false};                   // abort() came; cleared by clear_abort()
};

// SAL_DEVICE_PLANE: "auto" (the default) lets a plan whose ranks all have a GPU of their own use
// NCCL; "host" keeps every plan on the host data plane (Gloo with staging).
const char* mode_name(kc::GroupedGemmMode m) {
  switch (m) {
    case kc::GroupedGemmMode::fused: return "fused (cuBLASLt epilogues)";
    case kc::GroupedGemmMode::per_group: return "one cublasGemmEx per expert";
    case kc::GroupedGemmMode::grouped: return "grouped (cublasGemmGroupedBatchedEx)";
  }
  return "?";
}

Result<bool> device_plane_allowed() {
  const char* v = std::getenv("SAL_DEVICE_PLANE");
  std::string s = v ? v : "";
  if (s.empty() || s == "auto") return true;
  if (s == "host") return false;
  return fail("SAL_DEVICE_PLANE='", s, "': expected 'auto' (NCCL between GPUs of their own) or 'host' (Gloo only)");
}

// SAL_EXPERT_GEMM: how the expert MLPs issue their GEMMs (grouped_gemm.h). "auto" (the default):
// fused epilogues (cuBLASLt) where kc::check_fused_mode passes on this device, else one cublasGemmEx
// per expert; "fused", "per_expert" or "grouped" force one (benchmarks compare them).
Result<kc::GroupedGemmMode> expert_gemm_mode(const kc::Context& ctx, const std::string& name) {
  const char* v = std::getenv("SAL_EXPERT_GEMM");
  const std::string s = v ? v : "";
  if (s == "fused") return kc::GroupedGemmMode::fused;
  if (s == "per_expert") return kc::GroupedGemmMode::per_group;
  if (s == "grouped") return kc::GroupedGemmMode::grouped;
  if (!s.empty() && s != "auto")
    return fail("SAL_EXPERT_GEMM='", s, "': expected 'auto', 'fused', 'per_expert' or 'grouped'");
  if (kc::Status st = kc::check_fused_mode(ctx); !st.ok()) {
    spdlog::warn("{}: expert GEMMs one per expert, without fused epilogues: {}", name, st.what());
    return kc::GroupedGemmMode::per_group;
  }
  return kc::GroupedGemmMode::fused;
}

}  // namespace

Result<std::unique_ptr<DeviceCompute>> make_gpu_compute(int ordinal, const DeviceOptions& options) {
  std::string name = "cuda:" + std::to_string(ordinal);
  int n = kc::device_count();
  if (n == 0) return fail(name, ": this machine has no usable GPU (no CUDA device, or no driver)");
  if (ordinal < 0 || ordinal >= n)
    return fail(name, ": no such GPU (this machine has ", n, n == 1 ? " GPU: cuda:0" : " GPUs: cuda:0 to cuda:",
                n == 1 ? "" : std::to_string(n - 1), ")");
  std::unique_ptr<kc::Context> ctx;
  if (auto s = kc::Context::create(ordinal, &ctx); !s.ok()) return fail(name, ": ", s.what());
  auto copy = model::snapshot_copy_from_env();
  if (!copy) return copy.error().with_context(name);
  auto snapshot = model::PinnedSnapshot::create(*ctx, *copy);
  if (!snapshot) return snapshot.error().with_context(name + ": snapshot stream");
  auto allowed = device_plane_allowed();
  if (!allowed) return allowed.error().with_context(name);
  std::string key = *allowed ? kc::device_uuid(ordinal) : "";
  auto mode = expert_gemm_mode(*ctx, name);
  if (!mode) return mode.error().with_context(name);
  spdlog::info("{}: {}; expert GEMMs {}", name, kc::describe(ordinal), mode_name(*mode));
  return std::unique_ptr<DeviceCompute>(
      new GpuCompute(std::move(ctx), std::move(*snapshot), name, std::move(key), options, *mode));
}

}  // namespace sal::runtime

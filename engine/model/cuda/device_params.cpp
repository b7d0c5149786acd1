// device_params.cpp — see device_params.h. Every synchronous copy runs on the Context's stream
// (which is non-blocking: the legacy default stream would not wait for the kernels on it) and is
// followed by a wait for that stream, so the host vectors may be used or freed as soon as a call
// returns.
#include "model/cuda/device_params.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/convert.h"

namespace sal::model {
namespace {

kc::Status copy_to_device(const kc::Context& ctx, float* dst, const std::vector<float>& src) {
  if (src.empty()) return {};
  return kc::cuda_status(int(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice,
                                             ctx.stream())),
                         "cudaMemcpyAsync (unit upload)");
}

kc::Status copy_to_host(const kc::Context& ctx, std::vector<float>& dst, const float* src) {
  if (dst.empty()) return {};
  return kc::cuda_status(int(cudaMemcpyAsync(dst.data(), src, dst.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                             ctx.stream())),
                         "cudaMemcpyAsync (unit download)");
}

kc::Status zero(const kc::Context& ctx, kc::Buffer<float>& b) {
  if (b.size() == 0) return {};
  return kc::cuda_status(int(cudaMemsetAsync(b.get(), 0, b.bytes(), ctx.stream())), "cudaMemsetAsync (zero grads)");
}

kc::Status refresh_unit(const kc::Context& ctx, DeviceUnit& u) {
  if (!u.has_bf16()) return {};
  return kc::to_bf16(ctx, u.w.get(), u.w16.get(), u.size);
}

Status check_size(const Unit& u, size_t want) {
  for (const std::vector<float>* v : {&u.w, &u.g, &u.m, &u.v})
    if (v->size() != want)
      return fail(u.id.name(), ": host unit has a tensor of ", v->size(), " floats, the device unit ", want);
  return {};
}

}  // namespace

Result<std::shared_ptr<GpuEvent>> GpuEvent::create() {
  std::shared_ptr<GpuEvent> e(new GpuEvent());
  SAL_GPU_TRY(kc::cuda_status(int(cudaEventCreateWithFlags(&e->e_, cudaEventDisableTiming | cudaEventBlockingSync)),
                              "cudaEventCreateWithFlags (snapshot)"));
  return e;
}

// Destroying an event whose recorded work is still pending is allowed: CUDA releases it once done.
GpuEvent::~GpuEvent() {
  if (e_) (void)cudaEventDestroy(e_);
}

DeviceParams::~DeviceParams() {
  (void)ctx_.synchronize();
  (void)wait_readers();  // a failure leaves nothing better to do than free
}

void DeviceParams::add_reader(std::shared_ptr<GpuEvent> done) {
  if (!done) return;
  if (std::find(readers_.begin(), readers_.end(), done) == readers_.end()) readers_.push_back(done);
  if (std::find(unfenced_.begin(), unfenced_.end(), done) == unfenced_.end()) unfenced_.push_back(std::move(done));
}

Status DeviceParams::fence_writes() {
  for (const auto& e : unfenced_)
    SAL_GPU_TRY(kc::cuda_status(int(cudaStreamWaitEvent(ctx_.stream(), e->get(), 0)),
                                "cudaStreamWaitEvent (an update waits for the snapshot's copy)"));
  unfenced_.clear();
  return {};
}

Status DeviceParams::wait_readers() {
  for (const auto& e : readers_)
    SAL_GPU_TRY(kc::cuda_status(int(cudaEventSynchronize(e->get())), "cudaEventSynchronize (snapshot copy)"));
  return {};
}

bool DeviceParams::wants_bf16(UnitKind k) const {
  switch (k) {
    case UnitKind::dense:
    case UnitKind::expert: return true;
    case UnitKind::embedding: return bf16_head_;
    case UnitKind::gate: return false;
  }
  return false;
}

Result<std::unique_ptr<DeviceUnit>> DeviceParams::make_unit(const Unit& u) {
  auto d = std::make_unique<DeviceUnit>();
  d->id = u.id;
  d->frozen = u.frozen;
  d->size = unit_size(dims_, u.id.kind);
  SAL_TRY(check_size(u, d->size));
  for (kc::Buffer<float>* b : {&d->w, &d->g, &d->m, &d->v}) SAL_GPU_TRY(b->allocate(d->size));
  if (wants_bf16(u.id.kind)) SAL_GPU_TRY(d->w16.allocate(d->size));
  SAL_GPU_TRY(copy_to_device(ctx_, d->w.get(), u.w));
  SAL_GPU_TRY(copy_to_device(ctx_, d->m.get(), u.m));
  SAL_GPU_TRY(copy_to_device(ctx_, d->v.get(), u.v));
  SAL_GPU_TRY(zero(ctx_, d->g));
  SAL_GPU_TRY(refresh_unit(ctx_, *d));
  SAL_GPU_TRY(ctx_.synchronize());
  return d;
}

Result<std::unique_ptr<DeviceParams>> DeviceParams::create(const kc::Context& ctx, const Params& host, LmHead head) {
  const Dims& d = host.dims;
  if (int(host.dense.size()) != d.layers || int(host.gate.size()) != d.layers)
    return fail("DeviceParams: host params hold ", host.dense.size(), " dense and ", host.gate.size(),
                " gate units for ", d.layers, " layers");
  bool bf16 = head == LmHead::bf16 || (head == LmHead::automatic && d.vocab > kF32HeadMaxVocab);
  std::unique_ptr<DeviceParams> p(new DeviceParams(ctx, d, bf16));
  auto e = p->make_unit(host.embedding);
  if (!e) return e.error();
  p->embedding_ = std::move(*e);
  for (int l = 0; l < d.layers; ++l) {
    auto du = p->make_unit(host.dense[size_t(l)]);
    if (!du) return du.error();
    p->dense_.push_back(std::move(*du));
    auto gu = p->make_unit(host.gate[size_t(l)]);
    if (!gu) return gu.error();
    p->gate_.push_back(std::move(*gu));
  }
  for (const auto& [key, u] : host.experts) SAL_TRY(p->add_expert(u));
  return p;
}

DeviceUnit* DeviceParams::expert(int layer, int e) {
  auto it = experts_.find({layer, e});
  return it == experts_.end() ? nullptr : it->second.get();
}

std::vector<DeviceUnit*> DeviceParams::non_expert_units() {
  std::vector<DeviceUnit*> out{embedding_.get()};
  for (size_t l = 0; l < dense_.size(); ++l) {
    out.push_back(dense_[l].get());
    out.push_back(gate_[l].get());
  }
  return out;
}

std::vector<DeviceUnit*> DeviceParams::units() {
  std::vector<DeviceUnit*> out = non_expert_units();
  for (auto& [key, u] : experts_) out.push_back(u.get());
  return out;
}

std::vector<std::pair<int, int>> DeviceParams::held_experts() const {
  std::vector<std::pair<int, int>> out;
  for (const auto& [key, u] : experts_) out.push_back(key);
  return out;
}

size_t DeviceParams::parameter_count() const {
  size_t n = embedding_->size;
  for (const auto& u : dense_) n += u->size;
  for (const auto& u : gate_) n += u->size;
  for (const auto& [key, u] : experts_) n += u->size;
  return n;
}

DeviceUnit* DeviceParams::find(const UnitId& id) {
  switch (id.kind) {
    case UnitKind::embedding: return embedding_.get();
    case UnitKind::dense: return id.layer >= 0 && id.layer < int(dense_.size()) ? dense_[size_t(id.layer)].get() : nullptr;
    case UnitKind::gate: return id.layer >= 0 && id.layer < int(gate_.size()) ? gate_[size_t(id.layer)].get() : nullptr;
    case UnitKind::expert: return expert(id.layer, id.expert);
  }
  return nullptr;
}

Status DeviceParams::upload_unit(const Unit& u, unsigned parts) {
  DeviceUnit* d = find(u.id);
  if (!d) return fail("DeviceParams: no unit ", u.id.name(), " on the device");
  SAL_TRY(check_size(u, d->size));
  SAL_GPU_TRY(ctx_.synchronize());  // the kernels in flight may be reading the old values
  SAL_TRY(wait_readers());          // and so may a snapshot's copy
  if (parts & kValues) SAL_GPU_TRY(copy_to_device(ctx_, d->w.get(), u.w));
  if (parts & kGrads) SAL_GPU_TRY(copy_to_device(ctx_, d->g.get(), u.g));
  if (parts & kMoments) {
    SAL_GPU_TRY(copy_to_device(ctx_, d->m.get(), u.m));
    SAL_GPU_TRY(copy_to_device(ctx_, d->v.get(), u.v));
  }
  if (parts & kValues) {
    SAL_GPU_TRY(refresh_unit(ctx_, *d));
    d->frozen = u.frozen;
  }
  return gpu_status(ctx_.synchronize());
}

Status DeviceParams::download_unit(const UnitId& id, Unit& out, unsigned parts) {
  DeviceUnit* d = find(id);
  if (!d) return fail("DeviceParams: no unit ", id.name(), " on the device");
  out.id = id;
  for (std::vector<float>* v : {&out.w, &out.g, &out.m, &out.v}) v->resize(d->size);
  SAL_GPU_TRY(ctx_.synchronize());  // the values are final only when the stream's work is done
  if (parts & kValues) SAL_GPU_TRY(copy_to_host(ctx_, out.w, d->w.get()));
  if (parts & kGrads) SAL_GPU_TRY(copy_to_host(ctx_, out.g, d->g.get()));
  if (parts & kMoments) {
    SAL_GPU_TRY(copy_to_host(ctx_, out.m, d->m.get()));
    SAL_GPU_TRY(copy_to_host(ctx_, out.v, d->v.get()));
  }
  return gpu_status(ctx_.synchronize());
}

Status DeviceParams::upload(const Params& host, unsigned parts) {
  Params& h = const_cast<Params&>(host);  // Params::units() is not const; nothing is modified
  std::vector<Unit*> hs = h.units();
  std::vector<DeviceUnit*> ds = units();
  if (hs.size() != ds.size()) return fail("DeviceParams::upload: host holds ", hs.size(), " units, device ", ds.size());
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i]->id != ds[i]->id)
      return fail("DeviceParams::upload: host unit ", hs[i]->id.name(), " where the device has ", ds[i]->id.name());
    SAL_TRY(upload_unit(*hs[i], parts));
  }
  return {};
}

Status DeviceParams::download(Params& host, unsigned parts) {
  std::vector<Unit*> hs = host.units();
  std::vector<DeviceUnit*> ds = units();
  if (hs.size() != ds.size()) return fail("DeviceParams::download: host holds ", hs.size(), " units, device ", ds.size());
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i]->id != ds[i]->id)
      return fail("DeviceParams::download: host unit ", hs[i]->id.name(), " where the device has ", ds[i]->id.name());
    SAL_TRY(download_unit(ds[i]->id, *hs[i], parts));
  }
  return {};
}

Status DeviceParams::add_expert(const Unit& u) {
  if (u.id.kind != UnitKind::expert || u.id.layer < 0 || u.id.layer >= dims_.layers || u.id.expert < 0 ||
      u.id.expert >= dims_.experts)
    return fail("DeviceParams::add_expert: ", u.id.name(), " is not an expert of this model");
  auto d = make_unit(u);
  if (!d) return d.error();
  // Replacing a unit frees its memory: nothing in flight may still use it.
  SAL_GPU_TRY(ctx_.synchronize());
  SAL_TRY(wait_readers());
  experts_[{u.id.layer, u.id.expert}] = std::move(*d);
  return {};
}

void DeviceParams::remove_expert(int layer, int e) {
  auto it = experts_.find({layer, e});
  if (it == experts_.end()) return;
  (void)ctx_.synchronize();  // as in add_expert; a failed wait leaves the device unusable anyway
  (void)wait_readers();
  experts_.erase(it);
}

Status DeviceParams::zero_grads() {
  for (DeviceUnit* u : units()) SAL_GPU_TRY(zero(ctx_, u->g));
  return {};
}

Status DeviceParams::refresh_bf16() {
  for (DeviceUnit* u : units()) SAL_GPU_TRY(refresh_unit(ctx_, *u));
  return {};
}

}  // namespace sal::model

// gpu_exchange.cpp — see gpu_exchange.h. Row layouts, as in distributed_exchange.cpp: the send buffer is
// destination-major, then expert, then the tokens' slot order (permute_rows gives each assignment
// its row there); the receive buffer is source-major, then expert. The experts want one
// contiguous block each (expert order, within an expert the sources in rank order, which is the
// order DistributedExchange::run_experts concatenates them in), so received rows are scattered
// into the blocks with permute(k = 1) over `group` and gathered back with permute_backward(k = 1)
// over the same map.
//
// Staging memory discipline (the copies are asynchronous on pinned memory): the host writes the
// staging buffers only inside an all-to-all, and every all-to-all comes right after a wait for the
// stream, which has then finished every earlier copy out of them.
#include "runtime/gpu_exchange.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "kernels/cuda/moe_gate.h"
#include "kernels/cuda/permute.h"
#include "model/cuda/device_experts.h"

namespace sal::runtime {
namespace {

namespace kc = kernels::cuda;
using model::ensure;
using model::gpu_status;

template <class T>
kc::Status copy_async(const kc::Context& ctx, T* dst, const T* src, size_t n, cudaMemcpyKind kind,
                      const char* what) {
  if (n == 0) return {};
  return kc::cuda_status(int(cudaMemcpyAsync(dst, src, n * sizeof(T), kind, ctx.stream())), what);
}

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t(0)); }

std::string phase(int layer, const char* what) { return "layer " + std::to_string(layer) + " " + what; }

}  // namespace

// ---------- PinnedStaging ----------

PinnedStaging::~PinnedStaging() {
  if (p_) cudaFreeHost(p_);
}

Status PinnedStaging::reserve(const kc::Context& ctx, size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= bytes_) return {};
  SAL_TRY(gpu_status(ctx.synchronize()));  // copies in flight may still use the old memory
  if (p_) cudaFreeHost(p_);
  p_ = nullptr;
  bytes_ = 0;
  void* p = nullptr;
  if (auto s = kc::cuda_status(int(cudaMallocHost(&p, bytes)), "cudaMallocHost (staging)"); !s.ok())
    return fail(s.what(), " (", bytes, " bytes)");
  p_ = p;
  bytes_ = bytes;
  return {};
}

// ---------- PlanDeviceExchange ----------

PlanDeviceExchange::PlanDeviceExchange(comm::Collectives& comm, comm::Collectives* device_plane,
                                       model::DeviceParams& p, std::vector<Counts> replicas, kc::GroupedGemmMode mode)
    : comm_(comm), device_plane_(device_plane), p_(p), ctx_(p.context()), replicas_(std::move(replicas)), mode_(mode) {}

PlanDeviceExchange::~PlanDeviceExchange() { (void)ctx_.synchronize(); }

Status PlanDeviceExchange::global_stats(int layer, std::vector<double>& counts, std::vector<double>& prob_sums,
                                          double& tokens) {
  std::vector<double> buf(counts);
  buf.insert(buf.end(), prob_sums.begin(), prob_sums.end());
  buf.push_back(tokens);
  if (auto s = comm_.allreduce_sum(buf.data(), buf.size()); !s)
    return s.error().with_context(phase(layer, "global statistics"));
  const size_t e = counts.size();
  std::copy(buf.begin(), buf.begin() + long(e), counts.begin());
  std::copy(buf.begin() + long(e), buf.begin() + long(2 * e), prob_sums.begin());
  tokens = buf.back();
  return {};
}

kc::GroupedGemmMode PlanDeviceExchange::gemm_mode() const {
  return p_.dims().d % 8 == 0 ? mode_ : kc::GroupedGemmMode::per_group;
}

Status PlanDeviceExchange::check(const char* fn, int layer, const model::DeviceRouting& r) const {
  const model::Dims& d = p_.dims();
  const int E = d.experts;
  if (layer < 0 || layer >= d.layers || size_t(layer) >= replicas_.size())
    return fail("PlanDeviceExchange::", fn, ": layer ", layer, " out of range (", d.layers, " layers, replicas for ",
                replicas_.size(), ")");
  if (E < 1 || E > kc::kMaxPermuteExperts) return fail("PlanDeviceExchange::", fn, ": experts = ", E, " out of range");
  if (r.tokens < 0 || r.k < 1 || r.k > kc::kMaxTopK || r.k > E || int64_t(r.tokens) * r.k > kc::kMaxAssignments)
    return fail("PlanDeviceExchange::", fn, ": tokens = ", r.tokens, ", k = ", r.k, " (need tokens >= 0, 1 <= k <= ",
                kc::kMaxTopK, " and k <= experts = ", E, ")");
  if (r.tokens > 0 && (!r.idx || !r.w || !r.counts))
    return fail("PlanDeviceExchange::", fn, ": null routing pointer");
  return {};
}

Status PlanDeviceExchange::schedule(int layer, Layer& s, size_t assignments) {
  const int W = comm_.size(), me = comm_.rank(), E = p_.dims().experts, D = p_.dims().d;
  // This rank's column of the token counts (counted on the device by the caller).
  uint64_t counted = 0;
  for (uint32_t c : counts_host_) counted += c;
  // Ids outside [0, E) are not counted: their rows would be missing (the CPU would index out of
  // bounds there; here it is an error, found before any collective of this layer).
  if (counted != assignments)
    return fail(assignments - counted, " of ", assignments, " assignments name no expert in [0, ", E, ")");
  auto sched = gather_schedule(comm_, counts_host_, replicas_[size_t(layer)], weights, split);
  if (!sched) return sched.error().with_context("dispatch");
  s.schedule = std::move(*sched);

  // The held experts' rows; rows for an expert not held here are the plan's fault, named.
  s.rows.assign(size_t(E), 0);
  s.received = 0;
  for (int e = 0; e < E; ++e) {
    const uint32_t rows = s.schedule.quota[size_t(e)][size_t(me)];
    if (rows > 0 && !p_.expert(layer, e))
      return fail(rows, " tokens of expert ", e, " are scheduled to rank ", me, ", which does not hold it");
    s.rows[size_t(e)] = int(rows);
    s.received += rows;
  }
  s.send_floats.assign(size_t(W), 0);
  s.recv_floats.assign(size_t(W), 0);
  for (int i = 0; i < W; ++i) {
    s.send_floats[size_t(i)] = int64_t(s.schedule.total(me, i)) * D;
    s.recv_floats[size_t(i)] = int64_t(s.schedule.total(i, me)) * D;
  }
  if (uint64_t(sum(s.recv_floats)) != uint64_t(s.received) * uint64_t(D))
    return fail("the schedule gives rank ", me, " ", s.received, " rows to compute but ", sum(s.recv_floats) / D,
                " to receive");
  if (s.received > size_t(kc::kMaxAssignments))
    return fail(s.received, " rows received, more than ", kc::kMaxAssignments);

  // group[r]: received row r (source j, expert e, i-th of that segment) in expert e's block, the
  // sources in rank order within it.
  std::vector<size_t> next(size_t(E), 0);
  for (int e = 1; e < E; ++e) next[size_t(e)] = next[size_t(e) - 1] + size_t(s.rows[size_t(e) - 1]);
  group_host_.assign(s.received, 0);
  size_t row = 0;
  for (int j = 0; j < W; ++j)
    for (int e = 0; e < E; ++e)
      for (uint32_t i = 0; i < s.schedule.sent(e, j, me); ++i) group_host_[row++] = int32_t(next[size_t(e)]++);

  // send[e][j][i], as permute_rows takes it.
  send_host_.assign(size_t(E) * W * W, 0);
  for (int e = 0; e < E; ++e)
    for (int j = 0; j < W; ++j)
      for (int i = 0; i < W; ++i) send_host_[(size_t(e) * W + j) * W + i] = s.schedule.sent(e, j, i);
  return {};
}

Status PlanDeviceExchange::swap(const float* from, const std::vector<int64_t>& send_floats, float* to,
                                const std::vector<int64_t>& recv_floats, const char* what) {
  if (device_plane_) {
    // The device plane reads `from` on its own stream: the kernels writing it must be done.
    if (auto s = ctx_.synchronize(); !s.ok()) return fail(what, ": ", s.what());
    if (before_alltoall) before_alltoall();
    if (auto st = device_plane_->alltoallv(from, send_floats, to, recv_floats); !st)
      return st.error().with_context(what);
    return {};
  }
  const size_t ns = size_t(sum(send_floats)), nr = size_t(sum(recv_floats));
  SAL_TRY(out_.reserve(ctx_, ns * sizeof(float)));
  SAL_TRY(in_.reserve(ctx_, nr * sizeof(float)));
  if (auto s = copy_async(ctx_, out_.as<float>(), from, ns, cudaMemcpyDeviceToHost, "cudaMemcpyAsync (rows to the host)");
      !s.ok())
    return fail(what, ": ", s.what());
  // The rows must be on the host; this wait also ends every earlier copy out of in_.
  if (auto s = ctx_.synchronize(); !s.ok()) return fail(what, ": ", s.what());
  if (before_alltoall) before_alltoall();
  if (auto st = comm_.alltoallv(out_.as<float>(), send_floats, in_.as<float>(), recv_floats); !st)
    return st.error().with_context(what);
  if (auto s = copy_async(ctx_, to, in_.as<float>(), nr, cudaMemcpyHostToDevice, "cudaMemcpyAsync (rows to the device)");
      !s.ok())
    return fail(what, ": ", s.what());
  return {};
}

Status PlanDeviceExchange::forward(int layer, const model::DeviceRouting& r, const float* x, float* out) {
  SAL_TRY(check("forward", layer, r));
  if (auto s = run_forward(layer, r, x, out); !s) return s.error().with_context(phase(layer, "forward"));
  return {};
}

Status PlanDeviceExchange::run_forward(int layer, const model::DeviceRouting& r, const float* x, float* out) {
  const model::Dims& d = p_.dims();
  const int W = comm_.size(), me = comm_.rank(), E = d.experts, D = d.d;
  const size_t n = size_t(r.tokens) * size_t(r.k);
  Layer& s = layers_[layer];
  s.tokens = -1;  // valid again only once this forward has succeeded

  counts_host_.assign(size_t(E), 0);
  if (n > 0) {
    SAL_GPU_TRY(copy_async(ctx_, counts_host_.data(), r.counts, size_t(E), cudaMemcpyDeviceToHost,
                           "cudaMemcpyAsync (expert counts)"));
    SAL_GPU_TRY(ctx_.synchronize());
  }
  SAL_TRY(schedule(layer, s, n));
  const size_t R = s.received;

  SAL_GPU_TRY(ensure(ctx_, send_matrix_, send_host_.size()));
  SAL_GPU_TRY(ensure(ctx_, permute_ws_, kc::permute_workspace_bytes(r.tokens, r.k, E, W)));
  SAL_GPU_TRY(ensure(ctx_, slot_buf_, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, recv_buf_, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, block_in_, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, block_out_, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, mlp_scratch_, model::expert_scratch_bytes(d, R)));
  SAL_GPU_TRY(ensure(ctx_, s.slot_rows, n));
  SAL_GPU_TRY(ensure(ctx_, s.group, R));
  SAL_GPU_TRY(ensure(ctx_, s.y, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, s.x16, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, s.h, R * model::expert_hidden_floats(d)));
  // Pageable sources: cudaMemcpyAsync has copied them out when it returns, so the vectors may change.
  SAL_GPU_TRY(copy_async(ctx_, send_matrix_.get(), send_host_.data(), send_host_.size(), cudaMemcpyHostToDevice,
                         "cudaMemcpyAsync (dispatch schedule)"));
  SAL_GPU_TRY(copy_async(ctx_, s.group.get(), group_host_.data(), R, cudaMemcpyHostToDevice,
                         "cudaMemcpyAsync (regrouping map)"));

  // The tokens' rows, packed for the destinations, and swapped.
  SAL_GPU_TRY(kc::permute_rows(ctx_, r.idx, r.tokens, r.k, send_matrix_.get(), E, W, me, s.slot_rows.get(),
                               permute_ws_.get(), permute_ws_.size()));
  SAL_GPU_TRY(kc::permute(ctx_, x, s.slot_rows.get(), r.tokens, r.k, D, slot_buf_.get()));
  SAL_TRY(swap(slot_buf_.get(), s.send_floats, recv_buf_.get(), s.recv_floats, "all-to-all of the tokens"));

  // The held experts, each once on all its rows.
  SAL_GPU_TRY(kc::permute(ctx_, recv_buf_.get(), s.group.get(), int(R), 1, D, block_in_.get()));
  SAL_TRY(model::experts_forward(p_, layer, gemm_mode(), s.rows, block_in_.get(), block_out_.get(),
                                 model::ExpertRows{s.x16.get(), s.h.get()}, mlp_scratch_.get(), mlp_scratch_.size()));
  SAL_GPU_TRY(kc::permute_backward(ctx_, block_out_.get(), s.group.get(), int(R), 1, D, recv_buf_.get()));

  // The outputs back where their tokens came from, then the gate-weighted combine.
  SAL_TRY(swap(recv_buf_.get(), s.recv_floats, s.y.get(), s.send_floats, "all-to-all of the expert outputs"));
  SAL_GPU_TRY(kc::unpermute_combine(ctx_, s.y.get(), s.slot_rows.get(), r.w, r.tokens, r.k, D, out));
  s.tokens = r.tokens;
  s.k = r.k;
  return {};
}

Status PlanDeviceExchange::backward(int layer, const model::DeviceRouting& r, const float* d_out, float* dx,
                                      float* d_w) {
  SAL_TRY(check("backward", layer, r));
  if (auto s = run_backward(layer, r, d_out, dx, d_w); !s) return s.error().with_context(phase(layer, "backward"));
  return {};
}

Status PlanDeviceExchange::run_backward(int layer, const model::DeviceRouting& r, const float* d_out, float* dx,
                                          float* d_w) {
  auto it = layers_.find(layer);
  if (it == layers_.end() || it->second.tokens < 0) return fail("expert backward before forward");
  Layer& s = it->second;
  if (s.tokens != r.tokens || s.k != r.k)
    return fail("expert backward for ", r.tokens, " tokens x ", r.k, " after a forward of ", s.tokens, " x ", s.k);
  const int D = p_.dims().d;
  const size_t n = size_t(r.tokens) * size_t(r.k), R = s.received;
  // Another layer's forward may have run since with fewer rows: the shared scratch must fit this one.
  SAL_GPU_TRY(ensure(ctx_, slot_buf_, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, recv_buf_, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, block_in_, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, block_out_, R * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, mlp_scratch_, model::expert_scratch_bytes(p_.dims(), R)));

  // d_rows = w * d_out per assignment (send-buffer layout: what goes back to the experts),
  // d_w = dot(d_out, y).
  SAL_GPU_TRY(kc::unpermute_combine_backward(ctx_, d_out, s.y.get(), s.slot_rows.get(), r.w, r.tokens, r.k, D,
                                             slot_buf_.get(), d_w));
  SAL_TRY(swap(slot_buf_.get(), s.send_floats, recv_buf_.get(), s.recv_floats, "all-to-all of the output gradients"));
  SAL_GPU_TRY(kc::permute(ctx_, recv_buf_.get(), s.group.get(), int(R), 1, D, block_in_.get()));
  SAL_TRY(model::experts_backward(p_, layer, gemm_mode(), s.rows, model::ExpertRows{s.x16.get(), s.h.get()},
                                  block_in_.get(), block_out_.get(), mlp_scratch_.get(), mlp_scratch_.size()));
  SAL_GPU_TRY(kc::permute_backward(ctx_, block_out_.get(), s.group.get(), int(R), 1, D, recv_buf_.get()));
  SAL_TRY(swap(recv_buf_.get(), s.recv_floats, slot_buf_.get(), s.send_floats, "all-to-all of the input gradients"));
  // dx[t] = sum over the token's assignments of the experts' input gradients, j in order.
  SAL_GPU_TRY(kc::permute_backward(ctx_, slot_buf_.get(), s.slot_rows.get(), r.tokens, r.k, D, dx));
  return {};
}

// ---------- PlanGradientSync ----------

PlanGradientSync::~PlanGradientSync() { (void)p_.context().synchronize(); }

Status PlanGradientSync::sync(comm::Collectives& comm, const std::vector<SharedExpert>& shared) {
  if (comm.size() <= 1) return {};
  if (!device_plane_) return sync_staged(comm, shared);
  if (device_plane_->size() != comm.size() || device_plane_->rank() != comm.rank())
    return fail("the device plane is rank ", device_plane_->rank(), " of ", device_plane_->size(),
                ", the host plane rank ", comm.rank(), " of ", comm.size());
  return sync_direct(*device_plane_, shared);
}

Status PlanGradientSync::sync_staged(comm::Collectives& comm, const std::vector<SharedExpert>& shared) {
  const kc::Context& ctx = p_.context();
  const int me = comm.rank();
  // Every non-expert unit, in Trainer::sync_gradients's order, in one all-reduce.
  const std::vector<model::DeviceUnit*> dense = p_.non_expert_units();
  size_t total = 0;
  for (const model::DeviceUnit* u : dense) total += u->size;
  SAL_TRY(staging_.reserve(ctx, total * sizeof(float)));
  float* host = staging_.as<float>();
  size_t at = 0;
  for (const model::DeviceUnit* u : dense) {
    SAL_GPU_TRY(copy_async(ctx, host + at, u->g.get(), u->size, cudaMemcpyDeviceToHost,
                           "cudaMemcpyAsync (gradients to the host)"));
    at += u->size;
  }

  // The shared experts this rank holds, on the host (g only: what reduce_among_holders uses). Last
  // step's host memory is reused while the plan keeps them.
  std::map<std::pair<int, int>, model::Unit> held;
  std::vector<model::DeviceUnit*> from;
  for (const SharedExpert& s : shared) {
    if (!std::binary_search(s.holders.begin(), s.holders.end(), me)) continue;
    model::DeviceUnit* u = p_.expert(s.layer, s.expert);
    if (!u) return fail("rank ", me, " is a holder of layer", s.layer, ".expert", s.expert, " but does not hold it");
    model::Unit& h = held[{s.layer, s.expert}];
    if (auto it = experts_.experts.find({s.layer, s.expert}); it != experts_.experts.end()) h = std::move(it->second);
    h.id = u->id;
    h.g.resize(u->size);
    from.push_back(u);
  }
  experts_.dims = p_.dims();
  experts_.experts = std::move(held);
  for (model::DeviceUnit* u : from)
    SAL_GPU_TRY(copy_async(ctx, experts_.expert(u->id.layer, u->id.expert)->g.data(), u->g.get(), u->size,
                           cudaMemcpyDeviceToHost, "cudaMemcpyAsync (expert gradients to the host)"));
  SAL_GPU_TRY(ctx.synchronize());

  if (auto s = comm.allreduce_sum(host, total); !s) return s.error().with_context("all-reduce of the dense gradients");
  at = 0;
  for (model::DeviceUnit* u : dense) {
    SAL_GPU_TRY(copy_async(ctx, u->g.get(), host + at, u->size, cudaMemcpyHostToDevice,
                           "cudaMemcpyAsync (gradients to the device)"));
    at += u->size;
  }
  SAL_TRY(reduce_among_holders(comm, me, shared, experts_));
  for (model::DeviceUnit* u : from)
    SAL_GPU_TRY(copy_async(ctx, u->g.get(), experts_.expert(u->id.layer, u->id.expert)->g.data(), u->size,
                           cudaMemcpyHostToDevice, "cudaMemcpyAsync (expert gradients to the device)"));
  // The uploads from pageable memory are staged when the calls return, those from the pinned
  // staging memory are not: wait, so that the staging memory and the host copies are free again.
  SAL_GPU_TRY(ctx.synchronize());
  return {};
}

Status PlanGradientSync::sync_direct(comm::Collectives& plane, const std::vector<SharedExpert>& shared) {
  const kc::Context& ctx = p_.context();
  const int me = plane.rank();
  // The dense units packed into one device buffer, all-reduced in place, unpacked.
  const std::vector<model::DeviceUnit*> dense = p_.non_expert_units();
  size_t total = 0;
  for (const model::DeviceUnit* u : dense) total += u->size;
  SAL_GPU_TRY(model::ensure(ctx, dense_, total));
  size_t at = 0;
  for (const model::DeviceUnit* u : dense) {
    SAL_GPU_TRY(copy_async(ctx, dense_.get() + at, u->g.get(), u->size, cudaMemcpyDeviceToDevice,
                           "cudaMemcpyAsync (packing the dense gradients)"));
    at += u->size;
  }
  SAL_GPU_TRY(ctx.synchronize());  // the plane reads the buffer on its own stream
  if (auto s = plane.allreduce_sum(dense_.get(), total); !s)
    return s.error().with_context("all-reduce of the dense gradients");
  at = 0;
  for (model::DeviceUnit* u : dense) {
    SAL_GPU_TRY(copy_async(ctx, u->g.get(), dense_.get() + at, u->size, cudaMemcpyDeviceToDevice,
                           "cudaMemcpyAsync (unpacking the dense gradients)"));
    at += u->size;
  }

  // The shared experts among their holders, on the device: a root's parts in one inbox buffer.
  HolderGradients g;
  g.grads.assign(shared.size(), nullptr);
  g.sizes.assign(shared.size(), 0);
  std::vector<size_t> first(shared.size(), 0);  // [i]: shared[i]'s parts' offset in inbox_ (roots only)
  size_t inbox = 0, largest = 0;
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedExpert& s = shared[i];
    if (!std::binary_search(s.holders.begin(), s.holders.end(), me)) continue;
    model::DeviceUnit* u = p_.expert(s.layer, s.expert);
    if (!u) return fail("rank ", me, " is a holder of layer", s.layer, ".expert", s.expert, " but does not hold it");
    g.grads[i] = u->g.get();
    g.sizes[i] = u->size;
    if (s.root != me) continue;
    first[i] = inbox;
    inbox += s.holders.size() * u->size;
    largest = std::max(largest, u->size);
  }
  SAL_GPU_TRY(model::ensure(ctx, inbox_, inbox));
  SAL_GPU_TRY(model::ensure(ctx, sum_, largest));
  g.inbox = [&](size_t i, size_t k) -> Result<float*> { return inbox_.get() + first[i] + k * g.sizes[i]; };
  g.sum = [&](size_t i, const std::vector<const float*>& parts) -> Status {
    const size_t n = g.sizes[i];
    SAL_GPU_TRY(kc::cuda_status(int(cudaMemsetAsync(sum_.get(), 0, n * sizeof(float), ctx.stream())),
                                "cudaMemsetAsync (expert gradient sum)"));
    for (const float* part : parts) SAL_GPU_TRY(kc::add(ctx, sum_.get(), part, sum_.get(), n));
    SAL_GPU_TRY(copy_async(ctx, g.grads[i], sum_.get(), n, cudaMemcpyDeviceToDevice,
                           "cudaMemcpyAsync (expert gradient sum)"));
    return {};
  };
  g.before_exchange = [&]() -> Status { return gpu_status(ctx.synchronize()); };
  SAL_TRY(reduce_among_holders(plane, me, shared, g));
  SAL_GPU_TRY(ctx.synchronize());
  return {};
}

// ---------- global_grad_norm ----------

Result<double> global_grad_norm(comm::Collectives& comm, const std::vector<model::UnitId>& ids,
                                const std::vector<double>& sums, const std::vector<Counts>& replicas) {
  if (ids.size() != sums.size()) return fail("global_grad_norm: ", ids.size(), " units but ", sums.size(), " sums");
  double dense = 0, experts = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const model::UnitId& id = ids[i];
    if (id.kind != model::UnitKind::expert) {
      dense += sums[i];
      continue;
    }
    double h = 0;
    if (id.layer >= 0 && size_t(id.layer) < replicas.size() && id.expert >= 0 &&
        size_t(id.expert) < replicas[size_t(id.layer)].size())
      for (uint32_t units : replicas[size_t(id.layer)][size_t(id.expert)]) h += units > 0 ? 1 : 0;
    experts += sums[i] / std::max(h, 1.0);
  }
  if (comm.size() > 1)
    if (auto s = comm.allreduce_sum(&experts, 1); !s) return s.error().with_context("all-reduce of the expert norms");
  return std::sqrt(dense + experts);
}

}  // namespace sal::runtime

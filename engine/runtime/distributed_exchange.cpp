// distributed_exchange.cpp — see distributed_exchange.h. Row layouts: the send buffer is destination-major, then expert,
// then the tokens' slot order; the receive buffer is source-major, then expert. An expert's rows are
// the concatenation over sources, so each expert is computed once per step on one contiguous block.
#include "runtime/distributed_exchange.h"

#include <algorithm>

#include "comm/timed.h"

namespace sal::runtime {

DistributedExchange::DistributedExchange(comm::Collectives& comm, model::Params& params,
                                         const std::vector<Counts>& replicas)
    : comm_(comm), params_(params), replicas_(replicas) {}

Status DistributedExchange::global_stats(int, std::vector<double>& counts, std::vector<double>& prob_sums,
                                         double& tokens) {
  std::vector<double> buf(counts);
  buf.insert(buf.end(), prob_sums.begin(), prob_sums.end());
  buf.push_back(tokens);
  SAL_TRY(comm_.allreduce_sum(buf.data(), buf.size()));
  size_t e = counts.size();
  std::copy(buf.begin(), buf.begin() + long(e), counts.begin());
  std::copy(buf.begin() + long(e), buf.begin() + long(2 * e), prob_sums.begin());
  tokens = buf.back();
  return {};
}

// Packs the rows of the local slots, destination by destination and expert by expert, and swaps them.
Status DistributedExchange::send_rows(LayerState& s, const float* rows_by_slot, std::vector<float>& recv) {
  int W = comm_.size(), me = comm_.rank(), E = s.schedule.experts, D = params_.dims.d;
  std::vector<float> send;
  std::vector<int64_t> send_counts(static_cast<size_t>(W)), recv_counts(static_cast<size_t>(W));
  std::vector<size_t> next(size_t(E), 0);  // per expert: how many of its slots are packed
  for (int i = 0; i < W; ++i) {
    for (int e = 0; e < E; ++e) {
      uint32_t n = s.schedule.sent(e, me, i);
      for (uint32_t r = 0; r < n; ++r) {
        const float* row = rows_by_slot + size_t(s.slots[size_t(e)][next[size_t(e)]++]) * D;
        send.insert(send.end(), row, row + D);
      }
    }
    send_counts[size_t(i)] = s.send_rows[size_t(i)] * D;
    recv_counts[size_t(i)] = s.recv_rows[size_t(i)] * D;
  }
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  recv.assign(size_t(total), 0.0f);
  if (before_alltoall) before_alltoall();
  return comm_.alltoallv(send.data(), send_counts, recv.data(), recv_counts);
}

// The inverse of send_rows: `computed` is laid out like the receive buffer; the answers land in
// the slots they came from.
Status DistributedExchange::return_rows(LayerState& s, const std::vector<float>& computed, float* rows_by_slot) {
  int W = comm_.size(), me = comm_.rank(), E = s.schedule.experts, D = params_.dims.d;
  std::vector<int64_t> back_send(static_cast<size_t>(W)), back_recv(static_cast<size_t>(W));
  int64_t total = 0;
  for (int i = 0; i < W; ++i) {
    back_send[size_t(i)] = s.recv_rows[size_t(i)] * D;
    back_recv[size_t(i)] = s.send_rows[size_t(i)] * D;
    total += back_recv[size_t(i)];
  }
  std::vector<float> back(static_cast<size_t>(total));
  if (before_alltoall) before_alltoall();
  SAL_TRY(comm_.alltoallv(computed.data(), back_send, back.data(), back_recv));
  std::vector<size_t> next(size_t(E), 0);
  size_t row = 0;
  for (int i = 0; i < W; ++i)
    for (int e = 0; e < E; ++e)
      for (uint32_t r = 0; r < s.schedule.sent(e, me, i); ++r, ++row)
        std::copy(back.begin() + long(row) * D, back.begin() + long(row + 1) * D,
                  rows_by_slot + size_t(s.slots[size_t(e)][next[size_t(e)]++]) * D);
  return {};
}

Status DistributedExchange::stop_point(int layer, const char* where) {
  if (!stopped_ && !(stopping && stopping())) return {};
  stopped_ = true;
  return fail("layer ", layer, ": stopped ", where);
}

void DistributedExchange::count_work(const LayerState& s, int64_t cpu0) {
  expert_cpu_ms_ += double(comm::thread_cpu_ns() - cpu0) / 1e6;
  for (int64_t rows : s.recv_rows) expert_rows_ += rows;
}

// Runs every held expert on the rows it received. Forward when d_out_recv is null (fills the
// blocks), backward otherwise (uses them). `computed` gets outputs (or input gradients) in the
// receive buffer's layout.
Status DistributedExchange::run_experts(int layer, LayerState& s, const std::vector<float>& recv,
                                        std::vector<float>& computed, const float* d_out_recv) {
  int W = comm_.size(), me = comm_.rank(), E = s.schedule.experts, D = params_.dims.d;
  computed.assign(recv.size(), 0.0f);
  // offset[j][e]: first row from source j for expert e in the receive buffer
  std::vector<std::vector<size_t>> offset(static_cast<size_t>(W), std::vector<size_t>(static_cast<size_t>(E)));
  size_t row = 0;
  for (int j = 0; j < W; ++j)
    for (int e = 0; e < E; ++e) {
      offset[size_t(j)][size_t(e)] = row;
      row += s.schedule.sent(e, j, me);
    }
  for (int e = 0; e < E; ++e) {
    int rows = int(s.schedule.quota[size_t(e)][size_t(me)]);
    if (rows == 0) continue;
    SAL_TRY(stop_point(layer, d_out_recv ? "before an expert's backward" : "before an expert's forward"));
    model::Unit* u = unit_for(layer, s, e);
    if (!u) return fail("layer ", layer, ": ", rows, " tokens of expert ", e, " arrived at rank ", me, ", which does not hold it");
    std::vector<float> in(size_t(rows) * D), result(size_t(rows) * D);
    const float* src = d_out_recv ? d_out_recv : recv.data();
    size_t at = 0;
    for (int j = 0; j < W; ++j) {
      uint32_t n = s.schedule.sent(e, j, me);
      std::copy(src + offset[size_t(j)][size_t(e)] * D, src + (offset[size_t(j)][size_t(e)] + n) * D, in.begin() + long(at) * D);
      at += n;
    }
    model::ExpertBlock& block = s.blocks[e];
    if (!d_out_recv) {
      block.rows = rows;
      block.x = in;
      model::expert_forward(params_.dims, *u, block, result.data());
    } else {
      model::expert_backward(params_.dims, *u, block, in.data(), result.data());
    }
    at = 0;
    for (int j = 0; j < W; ++j) {
      uint32_t n = s.schedule.sent(e, j, me);
      std::copy(result.begin() + long(at) * D, result.begin() + long(at + n) * D,
                computed.begin() + long(offset[size_t(j)][size_t(e)]) * D);
      at += n;
    }
  }
  return {};
}

model::Unit* DistributedExchange::unit_for(int layer, LayerState& s, int e) {
  if (model::Unit* u = params_.expert(layer, e)) return u;
  auto it = s.shadow_units.find(e);
  return it == s.shadow_units.end() ? nullptr : &it->second;
}

Status DistributedExchange::plan_shadows(int layer, LayerState& s) {
  const int64_t weight_rows = int64_t(unit_size(params_.dims, UnitKind::expert)) / params_.dims.d;
  s.shadow = choose_shadows(s.schedule, replicas_[size_t(layer)], weights, weight_rows);
  if (!s.shadow.any()) return {};
  keep_shadowed_local(s.schedule, s.shadow);
  return fetch_shadows(layer, s);
}

// An all-to-all-v of floats outside the token exchange (no drill fault point), its counts per rank.
Result<std::vector<float>> DistributedExchange::swap_floats(int layer, const char* what, const std::vector<float>& send,
                                                            const std::vector<int64_t>& send_counts,
                                                            const std::vector<int64_t>& recv_counts) {
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  std::vector<float> recv(static_cast<size_t>(total));
  if (auto st = comm_.alltoallv(send.data(), send_counts, recv.data(), recv_counts); !st)
    return st.error().with_context("layer " + std::to_string(layer) + ": " + what);
  return recv;
}

// Each shadowed expert's weights from its source to the ranks computing it as a shadow, with the
// source's frozen flag (a frozen expert's shadows compute no weight gradient either). The receive
// buffer is source-major, then expert.
Status DistributedExchange::fetch_shadows(int layer, LayerState& s) {
  const int W = comm_.size(), me = comm_.rank(), E = s.schedule.experts;
  const Counts& units = replicas_[size_t(layer)];
  const size_t n = unit_size(params_.dims, UnitKind::expert) + 1;  // the weights, then the flag
  std::vector<float> send;
  std::vector<int64_t> send_counts(size_t(W), 0), recv_counts(size_t(W), 0);
  for (int i = 0; i < W; ++i)
    for (int e = 0; e < E; ++e) {
      if (!computes_shadow(s.schedule, units, s.shadow, e, i)) continue;
      const int from = s.shadow.source[size_t(e)];
      if (i == me) recv_counts[size_t(from)] += int64_t(n);
      if (from != me) continue;
      const model::Unit* u = params_.expert(layer, e);
      if (!u || u->w.size() + 1 != n) return fail("layer ", layer, ": rank ", me, " cannot send expert ", e, "'s weights");
      send.insert(send.end(), u->w.begin(), u->w.end());
      send.push_back(u->frozen ? 1.0f : 0.0f);
      send_counts[size_t(i)] += int64_t(n);
    }
  auto recv = swap_floats(layer, "the shadowed experts' weights", send, send_counts, recv_counts);
  if (!recv) return recv.error();
  size_t at = 0;
  for (int j = 0; j < W; ++j)
    for (int e = 0; e < E; ++e) {
      if (s.shadow.source[size_t(e)] != j || !computes_shadow(s.schedule, units, s.shadow, e, me)) continue;
      model::Unit& u = s.shadow_units[e];
      u.id = UnitId{UnitKind::expert, layer, e};
      u.w.assign(recv->begin() + long(at), recv->begin() + long(at + n - 1));
      u.frozen = (*recv)[at + n - 1] != 0.0f;
      u.g.assign(u.w.size(), 0.0f);
      at += n;
    }
  return {};
}

// Each shadow's weight gradient to its expert's source, which adds them into its own in rank order.
Status DistributedExchange::return_shadow_grads(int layer, LayerState& s) {
  const int W = comm_.size(), me = comm_.rank(), E = s.schedule.experts;
  const Counts& units = replicas_[size_t(layer)];
  const size_t n = unit_size(params_.dims, UnitKind::expert);
  std::vector<float> send;
  std::vector<int64_t> send_counts(size_t(W), 0), recv_counts(size_t(W), 0);
  for (int i = 0; i < W; ++i)  // destination-major, then expert
    for (const auto& [e, u] : s.shadow_units) {
      if (u.frozen || s.shadow.source[size_t(e)] != i) continue;
      send.insert(send.end(), u.g.begin(), u.g.end());
      send_counts[size_t(i)] += int64_t(n);
    }
  auto receives = [&](int e, int j) {
    if (s.shadow.source[size_t(e)] != me || !computes_shadow(s.schedule, units, s.shadow, e, j)) return false;
    const model::Unit* u = params_.expert(layer, e);
    return u && !u->frozen;
  };
  for (int j = 0; j < W; ++j)
    for (int e = 0; e < E; ++e)
      if (receives(e, j)) recv_counts[size_t(j)] += int64_t(n);
  auto recv = swap_floats(layer, "the shadowed experts' gradients", send, send_counts, recv_counts);
  if (!recv) return recv.error();
  size_t at = 0;
  for (int j = 0; j < W; ++j)
    for (int e = 0; e < E; ++e) {
      if (!receives(e, j)) continue;
      std::vector<float>& g = params_.expert(layer, e)->g;
      for (size_t k = 0; k < n; ++k) g[k] += (*recv)[at + k];
      at += n;
    }
  return {};
}

void DistributedExchange::log_forward(int layer, const LayerState& s, const float* x) {
  if (!log) return;
  const int W = comm_.size(), me = comm_.rank(), D = params_.dims.d;
  model::TokenRows& t = log->tokens[model::TokenKey{log_pass, layer}];
  t.k = s.k;
  t.x.assign(x, x + size_t(s.tokens) * size_t(D));
  for (int e = 0; e < s.schedule.experts; ++e) {
    const auto& slots = s.slots[size_t(e)];
    if (slots.empty()) continue;
    model::SentRows& r = log->rows[model::LogKey{log_pass, layer, e}];
    r.slots.assign(slots.begin(), slots.end());
    r.to = s.schedule.send[size_t(e)][size_t(me)];
    r.holders.clear();
    for (int i = 0; i < W; ++i)
      if (replicas_[size_t(layer)][size_t(e)][size_t(i)] > 0) r.holders.push_back(uint32_t(i));
  }
}

void DistributedExchange::note_combine(int layer, const float* dy, const float* w) {
  auto it = layers_.find(layer);
  if (!log || it == layers_.end()) return;
  const LayerState& s = it->second;
  model::TokenRows& t = log->tokens[model::TokenKey{log_pass, layer}];
  t.dy.assign(dy, dy + size_t(s.tokens) * size_t(params_.dims.d));
  t.w.assign(w, w + size_t(s.tokens) * size_t(s.k));
}

Status DistributedExchange::forward(int layer, const float* x, const model::Routing& r, float* out) {
  SAL_TRY(stop_point(layer, "before its forward"));
  int W = comm_.size(), me = comm_.rank(), E = params_.dims.experts, D = params_.dims.d;
  LayerState& s = layers_[layer];
  s = LayerState{};
  s.slots.assign(size_t(E), {});
  s.tokens = r.tokens, s.k = r.k;
  for (int slot = 0; slot < r.tokens * r.k; ++slot) s.slots[size_t(r.idx[size_t(slot)])].push_back(slot);
  std::vector<uint32_t> mine(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) mine[size_t(e)] = uint32_t(s.slots[size_t(e)].size());
  auto sched = gather_schedule(comm_, mine, replicas_[size_t(layer)], weights, split, shadows);
  if (!sched) return sched.error().with_context("layer " + std::to_string(layer) + " dispatch");
  s.schedule = std::move(*sched);
  if (shadows) SAL_TRY(plan_shadows(layer, s));
  s.send_rows.assign(size_t(W), 0);
  s.recv_rows.assign(size_t(W), 0);
  for (int i = 0; i < W; ++i) {
    s.send_rows[size_t(i)] = int64_t(s.schedule.total(me, i));
    s.recv_rows[size_t(i)] = int64_t(s.schedule.total(i, me));
  }
  // x rows per slot: slot t*k+j carries token t's row
  std::vector<float> by_slot(size_t(r.tokens) * r.k * D);
  for (int slot = 0; slot < r.tokens * r.k; ++slot)
    std::copy(x + size_t(slot / r.k) * D, x + size_t(slot / r.k + 1) * D, by_slot.begin() + long(slot) * D);
  log_forward(layer, s, x);
  std::vector<float> recv, computed;
  SAL_TRY(send_rows(s, by_slot.data(), recv));
  const int64_t cpu0 = comm::thread_cpu_ns();
  SAL_TRY(run_experts(layer, s, recv, computed, nullptr));
  count_work(s, cpu0);
  return return_rows(s, computed, out);
}

Status DistributedExchange::backward(int layer, const float* d_out, float* dx) {
  SAL_TRY(stop_point(layer, "before its backward"));
  if (before_backward) before_backward();
  auto it = layers_.find(layer);
  if (it == layers_.end()) return fail("layer ", layer, ": backward before forward");
  LayerState& s = it->second;
  std::vector<float> recv, computed;
  SAL_TRY(send_rows(s, d_out, recv));
  const int64_t cpu0 = comm::thread_cpu_ns();
  SAL_TRY(run_experts(layer, s, recv, computed, recv.data()));
  count_work(s, cpu0);
  if (s.shadow.any()) SAL_TRY(return_shadow_grads(layer, s));
  return return_rows(s, computed, dx);
}

}  // namespace sal::runtime

// moe_gpt.cpp — see moe_gpt.h. Notation: N = B*T local tokens, D = d_model, E experts, k top-k,
// V vocab. GEMMs are row-major: y = x W is gemm(N, out, in); dW += x^T dy; dx = dy W^T.
#include "model/moe_gpt.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "model/moe_layer.h"
#include "model/routing_trace.h"

namespace sal::model {

namespace k = sal::kernels::cpu;

namespace {

// y[N, out] = x[N, in] W[in, out] + b
void linear(const float* x, const float* w, const float* b, float* y, int n, int in, int out) {
  k::gemm(false, false, n, out, in, 1.0f, x, w, 0.0f, y);
  if (b) k::add_bias(y, b, n, out);
}

// SplitMix64's finaliser: a well-mixed 64-bit hash.
uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// dW += x^T dy, db += sum dy, dx = dy W^T (dw, db and dx may be null: a frozen unit has no dW, db)
void linear_backward(const float* x, const float* w, const float* dy, float* dw, float* db, float* dx, int n, int in,
                     int out) {
  if (dw) k::gemm(true, false, in, out, n, 1.0f, x, dy, 1.0f, dw);
  if (db) k::bias_grad(dy, db, n, out);
  if (dx) k::gemm(false, true, n, in, out, 1.0f, dy, w, 0.0f, dx);
}

}  // namespace

void forced_experts(const Dims& d, int layer, const int32_t* ids, int N, int T, int32_t* idx) {
  const int E = d.experts, K = d.top_k;
  std::vector<double> weight(static_cast<size_t>(E));
  for (int t = 0; t < N; ++t) {
    int pos = t % T;
    uint64_t h = mix64((uint64_t(layer) << 48) ^ (uint64_t(pos) << 32) ^ (uint64_t(uint32_t(ids[t])) << 16) ^
                       (pos > 0 ? uint64_t(uint32_t(ids[t - 1])) : 0xFFFFu));
    for (int e = 0; e < E; ++e) weight[size_t(e)] = e < d.hot_experts ? double(d.skew) : 1.0;
    for (int j = 0; j < K; ++j) {
      double total = 0;
      for (double w : weight) total += w;
      h = mix64(h + 0x9E3779B97F4A7C15ull);
      double pick = double(h >> 11) * 0x1.0p-53 * total;
      int e = 0;  // the chosen one; rounding past the end lands on the last one left
      for (int c = 0; c < E; ++c) {
        if (weight[size_t(c)] == 0) continue;
        e = c;
        if (pick < weight[size_t(c)]) break;
        pick -= weight[size_t(c)];
      }
      weight[size_t(e)] = 0;
      idx[size_t(t) * K + j] = e;
    }
  }
}

// Routing by a rule instead of the gate's top-k: a replayed trace's (the training batch's), else
// the forced skew's draws. The combine weights stay the gate's probabilities of the chosen experts,
// so the gate still learns.
void MoeGpt::force_routing(int l, int T, LayerActs& a) {
  const Dims& d = p_.dims;
  int E = d.experts, K = d.top_k, N = int(a.idx.size()) / K;
  if (batch_ && batch_->routing)
    batch_->routing->route(batch_->step, l, uint64_t(global_tokens_), K, uint64_t(batch_->first) * uint64_t(T), N,
                           a.idx.data());
  else
    forced_experts(d, l, inputs_->data(), N, T, a.idx.data());
  for (size_t i = 0; i < a.idx.size(); ++i) a.w[i] = a.gate_probs[(i / size_t(K)) * size_t(E) + size_t(a.idx[i])];
}

Status MoeGpt::forward(const std::vector<int32_t>& inputs, int B, int T, int64_t global_tokens, ExpertExchange& ex,
                       StepStats& stats) {
  inputs_ = &inputs;
  const Dims& d = p_.dims;
  int N = B * T, D = d.d;
  if (T > d.seq_len) return fail("sequence of ", T, " tokens exceeds model.seq_len = ", d.seq_len);
  acts_.resize(size_t(d.layers));
  auto el = embedding_layout(d);
  acts_[0].x.resize(size_t(N) * D);
  k::embedding_forward(inputs.data(), p_.embedding.at(el.tok), p_.embedding.at(el.pos), acts_[0].x.data(), B, T, D);
  global_tokens_ = global_tokens;
  stats.expert_counts.assign(size_t(d.layers), std::vector<uint32_t>(size_t(d.experts), 0));
  for (int l = 0; l < d.layers; ++l) SAL_TRY(forward_layer(l, B, T, ex, stats));
  // final LayerNorm and the tied LM head
  xf_.resize(size_t(N) * D);
  meanf_.resize(size_t(N));
  rstdf_.resize(size_t(N));
  k::layernorm_forward(x_final_.data(), p_.embedding.at(el.lnf_g), p_.embedding.at(el.lnf_b), xf_.data(), meanf_.data(),
                       rstdf_.data(), N, D);
  logits_.resize(size_t(N) * d.vocab);
  k::gemm(false, true, N, d.vocab, D, 1.0f, xf_.data(), p_.embedding.at(el.tok), 0.0f, logits_.data());
  return {};
}

Status MoeGpt::forward_layer(int l, int B, int T, ExpertExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims;
  int N = B * T, D = d.d, E = d.experts, K = d.top_k;
  LayerActs& a = acts_[size_t(l)];
  Unit& u = p_.dense[size_t(l)];
  auto dl = dense_layout(d);
  auto sz = [&](std::vector<float>& v, size_t n) { v.resize(n); };
  sz(a.h1, size_t(N) * D), sz(a.mean1, N), sz(a.rstd1, N), sz(a.qkv, size_t(N) * 3 * D);
  sz(a.att_probs, size_t(B) * d.heads * T * T), sz(a.att, size_t(N) * D), sz(a.xmid, size_t(N) * D);
  sz(a.h2, size_t(N) * D), sz(a.mean2, N), sz(a.rstd2, N), sz(a.gate_probs, size_t(N) * E);
  sz(a.w, size_t(N) * K), sz(a.out, size_t(N) * K * D);
  a.idx.resize(size_t(N) * K);
  // attention sub-block
  k::layernorm_forward(a.x.data(), u.at(dl.ln1_g), u.at(dl.ln1_b), a.h1.data(), a.mean1.data(), a.rstd1.data(), N, D);
  linear(a.h1.data(), u.at(dl.w_qkv), u.at(dl.b_qkv), a.qkv.data(), N, D, 3 * D);
  k::attention_forward(a.qkv.data(), a.att.data(), a.att_probs.data(), B, T, D, d.heads);
  linear(a.att.data(), u.at(dl.w_o), u.at(dl.b_o), a.xmid.data(), N, D, D);
  for (size_t i = 0; i < a.xmid.size(); ++i) a.xmid[i] += a.x[i];
  // gate and top-k
  k::layernorm_forward(a.xmid.data(), u.at(dl.ln2_g), u.at(dl.ln2_b), a.h2.data(), a.mean2.data(), a.rstd2.data(), N, D);
  std::vector<float> gate_logits(size_t(N) * E);
  linear(a.h2.data(), p_.gate[size_t(l)].at(gate_layout(d).w), nullptr, gate_logits.data(), N, D, E);
  k::softmax_forward(gate_logits.data(), a.gate_probs.data(), N, E);
  k::topk(a.gate_probs.data(), N, E, K, a.idx.data(), a.w.data());
  if ((batch_ && batch_->routing) || (d.skew != 1.0f && d.hot_experts > 0)) force_routing(l, T, a);
  // the balancing loss over the global batch: aux = alpha * E * sum_e f_e * P_e
  auto balance = global_balance(ex, l, a.idx, a.gate_probs, N, E, K, stats.expert_counts[size_t(l)]);
  if (!balance) return balance.error();
  a.global_tokens = balance->tokens;
  a.f = std::move(balance->f);
  stats.aux += aux_share_ * double(d.aux_weight) * E * balance->loss;
  // experts, then the gate-weighted combine into the residual stream
  Routing r{N, K, a.idx};
  SAL_TRY(ex.forward(l, a.h2.data(), r, a.out.data()));
  std::vector<float>& next = (l + 1 < d.layers) ? acts_[size_t(l) + 1].x : x_final_;
  next = a.xmid;
  combine(a.out, a.w, N, K, D, next);
  return {};
}

Status MoeGpt::backward(const std::vector<int32_t>& inputs, int B, int T, ExpertExchange& ex) {
  const Dims& d = p_.dims;
  int N = B * T, D = d.d;
  auto el = embedding_layout(d);
  // cross-entropy -> d logits
  std::vector<float> dlogits(logits_.size());
  k::cross_entropy_backward(probs_.data(), targets_.data(), dlogits.data(), N, d.vocab, float(1.0 / double(global_tokens_)));
  std::vector<float> dxf(size_t(N) * D), dres(size_t(N) * D);
  Unit& emb = p_.embedding;
  if (!emb.frozen) k::gemm(true, false, d.vocab, D, N, 1.0f, dlogits.data(), xf_.data(), 1.0f, emb.grad(el.tok));
  k::gemm(false, false, N, D, d.vocab, 1.0f, dlogits.data(), emb.at(el.tok), 0.0f, dxf.data());
  k::layernorm_backward(dxf.data(), x_final_.data(), emb.at(el.lnf_g), meanf_.data(), rstdf_.data(), dres.data(),
                        emb.weight_grad(el.lnf_g), emb.weight_grad(el.lnf_b), N, D);
  for (int l = d.layers - 1; l >= 0; --l) SAL_TRY(backward_layer(l, B, T, ex, dres));
  // the embeddings are the first operator: frozen, nothing below them needs a gradient
  if (!emb.frozen) k::embedding_backward(inputs.data(), dres.data(), emb.grad(el.tok), emb.grad(el.pos), B, T, D);
  return {};
}

// The gate: d(combine weight) and the balancing loss's gradient back through the softmax.
void MoeGpt::backward_gate(int l, int N, const std::vector<float>& dw, std::vector<float>& dh2) {
  const Dims& d = p_.dims;
  LayerActs& a = acts_[size_t(l)];
  int E = d.experts, K = d.top_k, D = d.d;
  std::vector<float> dprobs(size_t(N) * E, 0.0f), dlogits(size_t(N) * E), dh(size_t(N) * D);
  double aux_scale = a.global_tokens > 0 ? aux_share_ * double(d.aux_weight) * E / a.global_tokens : 0.0;
  for (int t = 0; t < N; ++t) {
    for (int e = 0; e < E; ++e) dprobs[size_t(t) * E + e] = float(aux_scale * a.f[size_t(e)]);
    for (int j = 0; j < K; ++j) dprobs[size_t(t) * E + a.idx[size_t(t) * K + j]] += dw[size_t(t) * K + j];
  }
  k::softmax_backward(a.gate_probs.data(), dprobs.data(), dlogits.data(), N, E);
  Unit& g = p_.gate[size_t(l)];
  auto gl = gate_layout(d);
  linear_backward(a.h2.data(), g.at(gl.w), dlogits.data(), g.weight_grad(gl.w), nullptr, dh.data(), N, D, E);
  for (size_t i = 0; i < dh2.size(); ++i) dh2[i] += dh[i];
}

// dres: gradient w.r.t. the layer's output stream on entry, w.r.t. its input stream on exit.
Status MoeGpt::backward_layer(int l, int B, int T, ExpertExchange& ex, std::vector<float>& dres) {
  const Dims& d = p_.dims;
  LayerActs& a = acts_[size_t(l)];
  int N = B * T, D = d.d, K = d.top_k;
  Unit& u = p_.dense[size_t(l)];
  auto dl = dense_layout(d);
  // MoE combine: y = sum_j w_j out_j
  std::vector<float> dw, d_out, dx_assign(size_t(N) * K * D);
  combine_backward(a.out, a.w, dres.data(), N, K, D, dw, d_out);
  ex.note_combine(l, dres.data(), a.w.data());
  SAL_TRY(ex.backward(l, d_out.data(), dx_assign.data()));
  std::vector<float> dh2(size_t(N) * D, 0.0f);
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < K; ++j) k::axpy(size_t(D), 1.0f, &dx_assign[(size_t(t) * K + j) * D], &dh2[size_t(t) * D]);
  backward_gate(l, N, dw, dh2);
  // LayerNorm 2: d xmid = dres (residual) + LN2'(dh2)
  std::vector<float> dxmid(size_t(N) * D);
  k::layernorm_backward(dh2.data(), a.xmid.data(), u.at(dl.ln2_g), a.mean2.data(), a.rstd2.data(), dxmid.data(),
                        u.weight_grad(dl.ln2_g), u.weight_grad(dl.ln2_b), N, D);
  for (size_t i = 0; i < dxmid.size(); ++i) dxmid[i] += dres[i];
  // attention output projection and attention
  std::vector<float> datt(size_t(N) * D), dqkv(size_t(N) * 3 * D), dh1(size_t(N) * D);
  linear_backward(a.att.data(), u.at(dl.w_o), dxmid.data(), u.weight_grad(dl.w_o), u.weight_grad(dl.b_o), datt.data(), N,
                  D, D);
  k::attention_backward(datt.data(), a.qkv.data(), a.att_probs.data(), dqkv.data(), B, T, D, d.heads);
  linear_backward(a.h1.data(), u.at(dl.w_qkv), dqkv.data(), u.weight_grad(dl.w_qkv), u.weight_grad(dl.b_qkv), dh1.data(),
                  N, D, 3 * D);
  // LayerNorm 1, plus the residual
  k::layernorm_backward(dh1.data(), a.x.data(), u.at(dl.ln1_g), a.mean1.data(), a.rstd1.data(), dres.data(),
                        u.weight_grad(dl.ln1_g), u.weight_grad(dl.ln1_b), N, D);
  for (size_t i = 0; i < dres.size(); ++i) dres[i] += dxmid[i];
  return {};
}

namespace {

// Points the model at the batch it runs on (replayed routing places its tokens) while a pass runs.
struct BatchScope {
  BatchScope(const Batch*& slot, const Batch& b) : slot_(slot) { slot_ = &b; }
  ~BatchScope() { slot_ = nullptr; }
  const Batch*& slot_;
};

}  // namespace

Result<StepStats> MoeGpt::step(const Batch& b, int64_t global_tokens, ExpertExchange& ex) {
  StepStats stats;
  int N = b.sequences * b.seq_len;
  stats.tokens = N;
  BatchScope scope(batch_, b);
  SAL_TRY(forward(b.inputs, b.sequences, b.seq_len, global_tokens, ex, stats));
  targets_ = b.targets;
  probs_.resize(logits_.size());
  stats.ce_sum = k::cross_entropy_forward(logits_.data(), targets_.data(), probs_.data(), N, p_.dims.vocab);
  SAL_TRY(backward(b.inputs, b.sequences, b.seq_len, ex));
  return stats;
}

Result<StepStats> MoeGpt::evaluate(const Batch& b, int64_t global_tokens, ExpertExchange& ex) {
  StepStats stats;
  const int N = b.sequences * b.seq_len;
  stats.tokens = N;
  BatchScope scope(batch_, b);
  SAL_TRY(forward(b.inputs, b.sequences, b.seq_len, global_tokens, ex, stats));
  probs_.resize(logits_.size());
  stats.ce_sum = k::cross_entropy_forward(logits_.data(), b.targets.data(), probs_.data(), N, p_.dims.vocab);
  stats.expert_counts.clear();  // a validation batch's routing is not the job's load
  return stats;
}

Result<std::vector<float>> MoeGpt::logits(const std::vector<int32_t>& ids, int B, int T, ExpertExchange& ex) {
  SAL_TRY(check_tokens(p_.dims, ids, B, T));
  StepStats stats;
  SAL_TRY(forward(ids, B, T, int64_t(B) * T, ex, stats));
  return logits_;
}

}  // namespace sal::model

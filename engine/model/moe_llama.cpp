// moe_llama.cpp — see moe_llama.h. Notation as in moe_gpt.cpp: N = B*T local tokens, D = d_model,
// KV = the key/value width (D / heads * kv_heads), hd the head size, E experts, k top-k, V vocab,
// S the shared experts' width. GEMMs are row-major: y = x W is gemm(N, out, in); dW += x^T dy;
// dx = dy W^T. The fused projection's row is [q (D) | k (KV) | v (KV)]; rotary positions turn q and
// k in place; with fewer key/value heads than query heads each key/value head is repeated for its
// group of query heads before the attention kernel, and the gradients of the repeats are summed.
#include "model/moe_llama.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "model/expert.h"
#include "model/moe_layer.h"
#include "model/router_bias.h"

namespace sal::model {

namespace k = sal::kernels::cpu;

namespace {

// y[n, out] = x[n, in] W[in, out]
void matmul(const float* x, const float* w, float* y, int n, int in, int out) {
  k::gemm(false, false, n, out, in, 1.0f, x, w, 0.0f, y);
}

// dW += x^T dy (dw null: a frozen unit), dx = dy W^T
void matmul_backward(const float* x, const float* w, const float* dy, float* dw, float* dx, int n, int in, int out) {
  if (dw) k::gemm(true, false, in, out, n, 1.0f, x, dy, 1.0f, dw);
  k::gemm(false, true, n, in, out, 1.0f, dy, w, 0.0f, dx);
}

// Columns [off, off + width) of N rows of `stride` floats, copied out to [N, width] (take) or back
// in from there (put).
void take_cols(const float* rows, int N, int stride, int off, int width, float* out) {
  for (int n = 0; n < N; ++n) std::copy_n(rows + size_t(n) * stride + off, width, out + size_t(n) * width);
}
void put_cols(const float* in, int N, int stride, int off, int width, float* rows) {
  for (int n = 0; n < N; ++n) std::copy_n(in + size_t(n) * width, width, rows + size_t(n) * stride + off);
}

}  // namespace

Status MoeLlama::forward(const std::vector<int32_t>& inputs, int B, int T, ExpertExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims;
  const int N = B * T, D = d.d, V = d.vocab;
  if (T > d.seq_len) return fail("sequence of ", T, " tokens exceeds model.seq_len = ", d.seq_len);
  acts_.resize(size_t(d.layers));
  auto el = embedding_layout(d);
  const float* tok = p_.embedding.at(el.tok);
  std::vector<float>& x = acts_[0].x;
  x.resize(size_t(N) * D);
  for (int n = 0; n < N; ++n) std::copy_n(tok + size_t(inputs[size_t(n)]) * D, D, &x[size_t(n) * D]);
  stats.expert_counts.assign(size_t(d.layers), std::vector<uint32_t>(size_t(d.experts), 0));
  for (int l = 0; l < d.layers; ++l) SAL_TRY(forward_layer(l, B, T, ex, stats));
  xf_.resize(size_t(N) * D);
  rstdf_.resize(size_t(N));
  k::rmsnorm_forward(x_final_.data(), p_.embedding.at(el.lnf_g), xf_.data(), rstdf_.data(), N, D, d.norm_eps);
  logits_.resize(size_t(N) * V);
  if (el.head.size)
    k::gemm(false, false, N, V, D, 1.0f, xf_.data(), p_.embedding.at(el.head), 0.0f, logits_.data());
  else
    k::gemm(false, true, N, V, D, 1.0f, xf_.data(), tok, 0.0f, logits_.data());
  return {};
}

// QK-norm: each token's queries (over d) and keys (over kv) RMS-normalised with their gains, in
// place in a.qkv (before the rotary positions); the raw ones and their rstd kept for the backward.
void MoeLlama::qk_norm_forward(const Unit& u, LayerActs& a, int N) {
  const Dims& d = p_.dims;
  const int D = d.d, KV = d.kv(), in = D + 2 * KV;
  auto dl = dense_layout(d);
  a.q_raw.resize(size_t(N) * D);
  a.k_raw.resize(size_t(N) * KV);
  a.q_rstd.resize(size_t(N));
  a.k_rstd.resize(size_t(N));
  std::vector<float> normed(size_t(N) * D);
  auto norm = [&](int off, int width, const float* gain, std::vector<float>& raw, std::vector<float>& rstd) {
    take_cols(a.qkv.data(), N, in, off, width, raw.data());
    k::rmsnorm_forward(raw.data(), gain, normed.data(), rstd.data(), N, width, d.norm_eps);
    put_cols(normed.data(), N, in, off, width, a.qkv.data());
  };
  norm(0, D, u.at(dl.q_norm), a.q_raw, a.q_rstd);
  norm(D, KV, u.at(dl.k_norm), a.k_raw, a.k_rstd);
}

// dqkv: the gradient w.r.t. the normalised queries and keys on entry, the raw ones' on exit (the
// values' columns untouched); the gains' gradients accumulate.
void MoeLlama::qk_norm_backward(Unit& u, const LayerActs& a, int N, std::vector<float>& dqkv) {
  const Dims& d = p_.dims;
  const int D = d.d, KV = d.kv(), in = D + 2 * KV;
  auto dl = dense_layout(d);
  std::vector<float> dy(size_t(N) * D), dx(size_t(N) * D);
  auto norm = [&](int off, int width, Slice gain, const std::vector<float>& raw, const std::vector<float>& rstd) {
    take_cols(dqkv.data(), N, in, off, width, dy.data());
    k::rmsnorm_backward(dy.data(), raw.data(), u.at(gain), rstd.data(), dx.data(), u.weight_grad(gain), N, width);
    put_cols(dx.data(), N, in, off, width, dqkv.data());
  };
  norm(0, D, dl.q_norm, a.q_raw, a.q_rstd);
  norm(D, KV, dl.k_norm, a.k_raw, a.k_rstd);
}

// The shared experts' output added to `next`: ungated (DeepSeek's), or each token's scaled by
// g = sigmoid(h2 . w_gate) (Qwen2-MoE's), the output and g kept for the backward.
void MoeLlama::shared_forward(const Unit& u, LayerActs& a, int N, std::vector<float>& next) {
  const Dims& d = p_.dims;
  const int D = d.d, S = d.shared_ffn;
  auto dl = dense_layout(d);
  a.shared_out.resize(size_t(N) * D);
  swiglu_mlp_forward(a.h2.data(), u.at(dl.sh_w13), u.at(dl.sh_w2), N, D, S, a.shared_h, a.shared_out.data());
  if (!dl.sh_gate.size) {
    for (size_t i = 0; i < next.size(); ++i) next[i] += a.shared_out[i];
    return;
  }
  a.shared_g.resize(size_t(N));
  std::vector<float> z(a.shared_g.size());
  matmul(a.h2.data(), u.at(dl.sh_gate), z.data(), N, D, 1);
  k::shared_gate_forward(z.data(), a.shared_out.data(), next.data(), a.shared_g.data(), N, D);
}

// dh2 (overwritten) from the layer output's gradient dres through the shared experts (and their
// gate); their weight gradients accumulate.
void MoeLlama::shared_backward(Unit& u, const LayerActs& a, int N, const std::vector<float>& dres,
                               std::vector<float>& dh2) {
  const Dims& d = p_.dims;
  const int D = d.d, S = d.shared_ffn;
  auto dl = dense_layout(d);
  if (!dl.sh_gate.size) {
    swiglu_mlp_backward(a.h2.data(), u.at(dl.sh_w13), u.at(dl.sh_w2), a.shared_h, dres.data(), u.weight_grad(dl.sh_w13),
                        u.weight_grad(dl.sh_w2), dh2.data(), N, D, S);
    return;
  }
  std::vector<float> dout(size_t(N) * D), dz(a.shared_g.size()), dh_gate(size_t(N) * D);
  k::shared_gate_backward(a.shared_g.data(), a.shared_out.data(), dres.data(), dout.data(), dz.data(), N, D);
  swiglu_mlp_backward(a.h2.data(), u.at(dl.sh_w13), u.at(dl.sh_w2), a.shared_h, dout.data(), u.weight_grad(dl.sh_w13),
                      u.weight_grad(dl.sh_w2), dh2.data(), N, D, S);
  matmul_backward(a.h2.data(), u.at(dl.sh_gate), dz.data(), u.weight_grad(dl.sh_gate), dh_gate.data(), N, D, 1);
  for (size_t i = 0; i < dh2.size(); ++i) dh2[i] += dh_gate[i];
}

Status MoeLlama::attention_forward(LayerActs& a, int B, int T) {
  const Dims& d = p_.dims;
  const int N = B * T, D = d.d, KV = d.kv(), hd = d.head_dim(), H = d.heads;
  const float theta = float(d.rope_theta);
  k::rope_forward(a.qkv.data(), N, T, D + 2 * KV, 0, H, hd, theta);
  k::rope_forward(a.qkv.data(), N, T, D + 2 * KV, D, d.kv_heads(), hd, theta);
  const bool grouped = KV < D;
  if (grouped) {
    a.full.resize(size_t(N) * 3 * D);
    k::expand_kv_heads(a.qkv.data(), a.full.data(), N, D, KV, hd);
  }
  a.att_probs.resize(size_t(B) * H * T * T);
  a.att.resize(size_t(N) * D);
  k::attention_forward(grouped ? a.full.data() : a.qkv.data(), a.att.data(), a.att_probs.data(), B, T, D, H);
  return {};
}

// The router: scores, the top k, the combine weights, the balancing statistics over the global
// batch, and the experts' outputs (a.out [N*k, D]) through the exchange.
Status MoeLlama::route(int l, LayerActs& a, ExpertExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims;
  const int D = d.d, E = d.experts, K = d.top_k, N = int(a.h2.size()) / D;
  a.z.resize(size_t(N) * E);
  matmul(a.h2.data(), p_.gate[size_t(l)].at(gate_layout(d).w), a.z.data(), N, D, E);
  a.scores.resize(a.z.size());
  if (d.sigmoid_router)
    k::sigmoid_forward(a.z.data(), a.scores.data(), a.z.size());
  else
    k::softmax_forward(a.z.data(), a.scores.data(), N, E);
  a.idx.resize(size_t(N) * K);
  a.chosen.resize(size_t(N) * K);
  a.w.resize(size_t(N) * K);
  const float* bias = d.router_bias ? p_.gate[size_t(l)].at(gate_layout(d).bias) : nullptr;
  biased_topk(a.scores.data(), bias, N, E, K, a.idx.data(), a.chosen.data());
  k::topk_weights(a.chosen.data(), a.w.data(), N, K, d.norm_topk);
  // the Switch balancing loss over the global batch, on the normalised scores: aux = alpha E sum_e f_e P_e
  std::vector<float> normalised;
  if (d.sigmoid_router) {
    normalised.resize(a.scores.size());
    k::normalise_rows(a.scores.data(), normalised.data(), N, E);
  }
  auto balance = global_balance(ex, l, a.idx, d.sigmoid_router ? normalised : a.scores, N, E, K,
                                stats.expert_counts[size_t(l)]);
  if (!balance) return balance.error();
  a.global_tokens = balance->tokens;
  a.f = std::move(balance->f);
  if (d.router_bias) {
    if (stats.router_load.empty()) stats.router_load.assign(size_t(d.layers), std::vector<double>(size_t(E), 0.0));
    for (int e = 0; e < E; ++e) stats.router_load[size_t(l)][size_t(e)] = aux_share_ * a.f[size_t(e)];
  }
  stats.aux += aux_share_ * double(d.aux_weight) * E * balance->loss;
  a.lse.resize(size_t(N));
  k::row_logsumexp(a.z.data(), a.lse.data(), N, E);
  for (int t = 0; t < N; ++t) stats.z_sum += double(d.z_loss_weight) * double(a.lse[size_t(t)]) * a.lse[size_t(t)];
  a.out.resize(size_t(N) * K * D);
  return ex.forward(l, a.h2.data(), Routing{N, K, a.idx}, a.out.data());
}

Status MoeLlama::forward_layer(int l, int B, int T, ExpertExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims;
  const int N = B * T, D = d.d, KV = d.kv(), K = d.top_k, S = d.shared_ffn;
  LayerActs& a = acts_[size_t(l)];
  Unit& u = p_.dense[size_t(l)];
  auto dl = dense_layout(d);
  a.h1.resize(size_t(N) * D);
  a.rstd1.resize(size_t(N));
  k::rmsnorm_forward(a.x.data(), u.at(dl.ln1_g), a.h1.data(), a.rstd1.data(), N, D, d.norm_eps);
  a.qkv.resize(size_t(N) * (D + 2 * KV));
  matmul(a.h1.data(), u.at(dl.w_qkv), a.qkv.data(), N, D, D + 2 * KV);
  if (dl.b_qkv.size)
    for (int n = 0; n < N; ++n) k::axpy(dl.b_qkv.size, 1.0f, u.at(dl.b_qkv), &a.qkv[size_t(n) * (D + 2 * KV)]);
  if (d.qk_norm) qk_norm_forward(u, a, N);
  SAL_TRY(attention_forward(a, B, T));
  a.xmid.resize(size_t(N) * D);
  matmul(a.att.data(), u.at(dl.w_o), a.xmid.data(), N, D, D);
  for (size_t i = 0; i < a.xmid.size(); ++i) a.xmid[i] += a.x[i];
  a.h2.resize(size_t(N) * D);
  a.rstd2.resize(size_t(N));
  k::rmsnorm_forward(a.xmid.data(), u.at(dl.ln2_g), a.h2.data(), a.rstd2.data(), N, D, d.norm_eps);
  SAL_TRY(route(l, a, ex, stats));
  std::vector<float>& next = (l + 1 < d.layers) ? acts_[size_t(l) + 1].x : x_final_;
  next = a.xmid;
  combine(a.out, a.w, N, K, D, next);
  if (S > 0) shared_forward(u, a, N, next);
  return {};
}

Status MoeLlama::backward(const std::vector<int32_t>& inputs, int B, int T, ExpertExchange& ex) {
  const Dims& d = p_.dims;
  const int N = B * T, D = d.d, V = d.vocab;
  auto el = embedding_layout(d);
  Unit& emb = p_.embedding;
  std::vector<float> dlogits(logits_.size()), dxf(size_t(N) * D), dres(size_t(N) * D);
  k::cross_entropy_backward(probs_.data(), targets_.data(), dlogits.data(), N, V, float(1.0 / double(global_tokens_)));
  if (el.head.size) {
    if (!emb.frozen) k::gemm(true, false, D, V, N, 1.0f, xf_.data(), dlogits.data(), 1.0f, emb.grad(el.head));
    k::gemm(false, true, N, D, V, 1.0f, dlogits.data(), emb.at(el.head), 0.0f, dxf.data());
  } else {
    if (!emb.frozen) k::gemm(true, false, V, D, N, 1.0f, dlogits.data(), xf_.data(), 1.0f, emb.grad(el.tok));
    k::gemm(false, false, N, D, V, 1.0f, dlogits.data(), emb.at(el.tok), 0.0f, dxf.data());
  }
  k::rmsnorm_backward(dxf.data(), x_final_.data(), emb.at(el.lnf_g), rstdf_.data(), dres.data(),
                      emb.weight_grad(el.lnf_g), N, D);
  for (int l = d.layers - 1; l >= 0; --l) SAL_TRY(backward_layer(l, B, T, ex, dres));
  if (emb.frozen) return {};  // the first operator: nothing below it needs a gradient
  float* dtok = emb.grad(el.tok);
  for (int n = 0; n < N; ++n) k::axpy(size_t(D), 1.0f, &dres[size_t(n) * D], dtok + size_t(inputs[size_t(n)]) * D);
  return {};
}

// The router's gradient: the combine weights' (through the renormalisation), the balancing loss's
// and the z-loss's, back through the scores to the router logits and on to h2.
void MoeLlama::backward_router(int l, const std::vector<float>& dw, std::vector<float>& dh2) {
  const Dims& d = p_.dims;
  LayerActs& a = acts_[size_t(l)];
  const int D = d.d, E = d.experts, K = d.top_k, N = int(a.idx.size()) / K;
  const double aux_scale = a.global_tokens > 0 ? aux_share_ * double(d.aux_weight) * E / a.global_tokens : 0.0;
  const double z_scale = global_tokens_ > 0 ? 2.0 * double(d.z_loss_weight) / double(global_tokens_) : 0.0;
  std::vector<float> dscores(size_t(N) * E), dz(size_t(N) * E);
  k::RouterGrad g;
  g.scores = a.scores.data();
  g.chosen = a.chosen.data();
  g.w = a.w.data();
  g.idx = a.idx.data();
  g.dw = dw.data();
  g.f = a.f.data();
  g.aux_scale = aux_scale;
  g.sigmoid = d.sigmoid_router;
  g.norm = d.norm_topk;
  k::router_dscores(g, N, E, K, dscores.data());
  k::router_dlogits(a.z.data(), a.scores.data(), dscores.data(), a.lse.data(), z_scale, d.sigmoid_router, N, E,
                    dz.data());
  Unit& gate = p_.gate[size_t(l)];
  auto gl = gate_layout(d);
  std::vector<float> dh(size_t(N) * D);
  matmul_backward(a.h2.data(), gate.at(gl.w), dz.data(), gate.weight_grad(gl.w), dh.data(), N, D, E);
  for (size_t i = 0; i < dh2.size(); ++i) dh2[i] += dh[i];
}

// dxmid -> dh1 through the output projection, the attention, the rotary positions and the fused
// projection.
void MoeLlama::backward_attention(int l, int B, int T, const std::vector<float>& dxmid, std::vector<float>& dh1) {
  const Dims& d = p_.dims;
  LayerActs& a = acts_[size_t(l)];
  const int N = B * T, D = d.d, KV = d.kv(), hd = d.head_dim(), H = d.heads;
  Unit& u = p_.dense[size_t(l)];
  auto dl = dense_layout(d);
  std::vector<float> datt(size_t(N) * D), dfull(size_t(N) * 3 * D);
  matmul_backward(a.att.data(), u.at(dl.w_o), dxmid.data(), u.weight_grad(dl.w_o), datt.data(), N, D, D);
  const bool grouped = KV < D;
  k::attention_backward(datt.data(), grouped ? a.full.data() : a.qkv.data(), a.att_probs.data(), dfull.data(), B, T,
                        D, H);
  std::vector<float> dqkv;
  if (grouped) {
    dqkv.resize(size_t(N) * (D + 2 * KV));
    k::collapse_kv_heads(dfull.data(), dqkv.data(), N, D, KV, hd);
  } else {
    dqkv = std::move(dfull);
  }
  const float theta = float(d.rope_theta);
  k::rope_backward(dqkv.data(), N, T, D + 2 * KV, 0, H, hd, theta);
  k::rope_backward(dqkv.data(), N, T, D + 2 * KV, D, d.kv_heads(), hd, theta);
  if (d.qk_norm) qk_norm_backward(u, a, N, dqkv);
  if (dl.b_qkv.size && !u.frozen)  // the biases' gradient: each column's sum over the tokens
    for (int n = 0; n < N; ++n) k::axpy(dl.b_qkv.size, 1.0f, &dqkv[size_t(n) * (D + 2 * KV)], u.grad(dl.b_qkv));
  matmul_backward(a.h1.data(), u.at(dl.w_qkv), dqkv.data(), u.weight_grad(dl.w_qkv), dh1.data(), N, D, D + 2 * KV);
}

// dres: gradient w.r.t. the layer's output stream on entry, w.r.t. its input stream on exit.
Status MoeLlama::backward_layer(int l, int B, int T, ExpertExchange& ex, std::vector<float>& dres) {
  const Dims& d = p_.dims;
  LayerActs& a = acts_[size_t(l)];
  const int N = B * T, D = d.d, K = d.top_k, S = d.shared_ffn;
  Unit& u = p_.dense[size_t(l)];
  auto dl = dense_layout(d);
  std::vector<float> dh2(size_t(N) * D, 0.0f);
  if (S > 0) shared_backward(u, a, N, dres, dh2);
  // the routed experts' combine: y = sum_j w_j out_j
  std::vector<float> dw, d_out, dx_assign(size_t(N) * K * D);
  combine_backward(a.out, a.w, dres.data(), N, K, D, dw, d_out);
  ex.note_combine(l, dres.data(), a.w.data());
  SAL_TRY(ex.backward(l, d_out.data(), dx_assign.data()));
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < K; ++j) k::axpy(size_t(D), 1.0f, &dx_assign[(size_t(t) * K + j) * D], &dh2[size_t(t) * D]);
  backward_router(l, dw, dh2);
  std::vector<float> dxmid(size_t(N) * D), dh1(size_t(N) * D);
  k::rmsnorm_backward(dh2.data(), a.xmid.data(), u.at(dl.ln2_g), a.rstd2.data(), dxmid.data(), u.weight_grad(dl.ln2_g),
                      N, D);
  for (size_t i = 0; i < dxmid.size(); ++i) dxmid[i] += dres[i];
  backward_attention(l, B, T, dxmid, dh1);
  k::rmsnorm_backward(dh1.data(), a.x.data(), u.at(dl.ln1_g), a.rstd1.data(), dres.data(), u.weight_grad(dl.ln1_g), N,
                      D);
  for (size_t i = 0; i < dres.size(); ++i) dres[i] += dxmid[i];
  return {};
}

Result<StepStats> MoeLlama::loss(const Batch& b, int64_t global_tokens, ExpertExchange& ex) {
  StepStats stats;
  const int N = b.sequences * b.seq_len;
  stats.tokens = N;
  global_tokens_ = global_tokens;
  SAL_TRY(forward(b.inputs, b.sequences, b.seq_len, ex, stats));
  probs_.resize(logits_.size());
  targets_ = b.targets;
  stats.ce_sum = k::cross_entropy_forward(logits_.data(), targets_.data(), probs_.data(), N, p_.dims.vocab);
  return stats;
}

Result<StepStats> MoeLlama::step(const Batch& b, int64_t global_tokens, ExpertExchange& ex) {
  auto stats = loss(b, global_tokens, ex);
  if (!stats) return stats;
  SAL_TRY(backward(b.inputs, b.sequences, b.seq_len, ex));
  return stats;
}

Result<StepStats> MoeLlama::evaluate(const Batch& b, int64_t global_tokens, ExpertExchange& ex) {
  auto stats = loss(b, global_tokens, ex);
  if (stats) stats->expert_counts.clear();  // a validation batch's routing is not the job's load
  return stats;
}

Result<std::vector<float>> MoeLlama::logits(const std::vector<int32_t>& ids, int B, int T, ExpertExchange& ex) {
  SAL_TRY(check_tokens(p_.dims, ids, B, T));
  StepStats stats;
  global_tokens_ = int64_t(B) * T;
  SAL_TRY(forward(ids, B, T, ex, stats));
  return logits_;
}

}  // namespace sal::model

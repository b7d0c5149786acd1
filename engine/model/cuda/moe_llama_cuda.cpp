// moe_llama_cuda.cpp — see moe_llama_cuda.h. Notation as in model/moe_llama.cpp: N = B*T local
// tokens, D = d_model, KV the key/value width, in = D + 2 KV the fused projection's row, hd the head
// size, E experts, K top-k, V vocab, S the shared experts' width. GEMMs are row-major: y = x W is
// gemm(N, out, in); dW += x^T dy; dx = dy W^T. Each function mirrors the CPU model's of the same
// name.
#include "model/cuda/moe_llama_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/heads.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/moe_gate.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/permute.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/router.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/swiglu_experts.h"

namespace sal::model {
namespace {

// Columns [off, off + width) of N rows of `stride` floats, to or from a packed [N, width] (the
// CPU's take_cols / put_cols), as one strided copy on the stream.
kc::Status copy_cols(const kc::Context& ctx, float* dst, size_t dst_stride, const float* src, size_t src_stride,
                     int width, int N, const char* what) {
  if (N == 0 || width == 0) return {};
  return kc::cuda_status(int(cudaMemcpy2DAsync(dst, dst_stride * sizeof(float), src, src_stride * sizeof(float),
                                               size_t(width) * sizeof(float), size_t(N), cudaMemcpyDeviceToDevice,
                                               ctx.stream())),
                         what);
}

}  // namespace

MoeLlamaCuda::MoeLlamaCuda(DeviceParams& p) : ctx_(p.context()), p_(p) {}

// Sizes every buffer for a batch of B sequences of T tokens (growing only).
Status MoeLlamaCuda::reserve(int B, int T) {
  const Dims& d = p_.dims();
  const size_t N = size_t(B) * size_t(T), D = size_t(d.d), E = size_t(d.experts), K = size_t(d.top_k),
               V = size_t(d.vocab), H = size_t(d.heads), IN = D + 2 * size_t(d.kv()), S = size_t(d.shared_ffn);
  const size_t probs = size_t(B) * H * size_t(T) * size_t(T);
  const bool grouped = d.kv() < d.d;
  acts_.resize(size_t(d.layers));
  for (LayerActs& a : acts_) {
    for (auto [buf, n] : {std::pair{&a.x, N * D}, {&a.rstd1, N}, {&a.qkv, N * IN}, {&a.att_probs, probs},
                          {&a.xmid, N * D}, {&a.rstd2, N}, {&a.h2, N * D}, {&a.z, N * E}, {&a.scores, N * E},
                          {&a.chosen, N * K}, {&a.w, N * K}, {&a.lse, N}})
      SAL_GPU_TRY(ensure(ctx_, *buf, n));
    if (grouped) SAL_GPU_TRY(ensure(ctx_, a.full, N * 3 * D));
    if (d.qk_norm)
      for (auto [buf, n] : {std::pair{&a.q_raw, N * D}, {&a.k_raw, N * size_t(d.kv())}, {&a.q_rstd, N}, {&a.k_rstd, N}})
        SAL_GPU_TRY(ensure(ctx_, *buf, n));
    if (S > 0) {
      SAL_GPU_TRY(ensure(ctx_, a.shared_h, N * 2 * S));
      SAL_GPU_TRY(ensure(ctx_, a.shared_out, N * D));
      SAL_GPU_TRY(ensure(ctx_, a.shared_x16, N * D));
      if (d.shared_gate) SAL_GPU_TRY(ensure(ctx_, a.shared_g, N));
    }
    SAL_GPU_TRY(ensure(ctx_, a.h1_16, N * D));
    SAL_GPU_TRY(ensure(ctx_, a.att16, N * D));
    SAL_GPU_TRY(ensure(ctx_, a.idx, N * K));
    SAL_GPU_TRY(ensure(ctx_, a.counts, E));
    SAL_GPU_TRY(ensure(ctx_, a.f, E));
  }
  for (auto [buf, n] :
       {std::pair{&x_final_, N * D}, {&xf_, N * D}, {&rstdf_, N}, {&logits_, N * V}, {&probs_, N * V},
        {&h1_, N * D}, {&att_, N * D}, {&moe_out_, N * D}, {&normalised_, N * E}, {&dscores_, N * E}, {&dz_, N * E},
        {&dw_, N * K}, {&cols_, N * D}, {&cols2_, N * D}, {&zg_, N}, {&dzg_, N}, {&dshared_, N * D}, {&dres_, N * D},
        {&dxmid_, N * D}, {&datt_, N * D}, {&dqkv_, N * IN}, {&dfull_, N * 3 * D}, {&dh1_, N * D}, {&dh2_, N * D},
        {&dmoe_, N * D}, {&dxf_, N * D}, {&rms_scratch_, kc::rmsnorm_backward_scratch_floats(int(N), int(D))}})
    SAL_GPU_TRY(ensure(ctx_, *buf, n));
  SAL_TRY(tokens_.reserve(ctx_, N));
  SAL_GPU_TRY(ensure(ctx_, prob_sums_, E));
  SAL_GPU_TRY(ensure(ctx_, grad16_, N * std::max(IN, 3 * D)));
  SAL_GPU_TRY(ensure(ctx_, att_scratch_, kc::attention_scratch_bytes(B, T, int(D), int(H))));
  if (S > 0) SAL_GPU_TRY(ensure(ctx_, shared_scratch_, kc::swiglu_experts_scratch_bytes(int(N), int(D), int(S))));
  if (p_.bf16_head()) {
    SAL_GPU_TRY(ensure(ctx_, xf16_, N * D));
    SAL_GPU_TRY(ensure(ctx_, dlogits16_, N * V));
  }
  return {};
}

DeviceRouting MoeLlamaCuda::routing(int l, int N) const {
  const LayerActs& a = acts_[size_t(l)];
  return DeviceRouting{N, p_.dims().top_k, a.idx.get(), a.w.get(), a.counts.get()};
}

Status MoeLlamaCuda::forward(const std::vector<int32_t>& inputs, int B, int T, DeviceExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims();
  SAL_TRY(DeviceTokens::check_forward(inputs, B, T, d.seq_len));
  const int N = B * T, D = d.d;
  SAL_TRY(reserve(B, T));
  DeviceUnit& emb = p_.embedding();
  const EmbeddingLayout el = embedding_layout(d);
  SAL_TRY(tokens_.upload_ids(ctx_, inputs));
  SAL_GPU_TRY(kc::embedding_forward(ctx_, tokens_.ids(), emb.at(el.tok), nullptr, acts_[0].x.get(), B, T, D, d.vocab,
                                    tokens_.bad_ids()));
  stats.expert_counts.assign(size_t(d.layers), std::vector<uint32_t>(size_t(d.experts), 0));
  for (int l = 0; l < d.layers; ++l) SAL_TRY(forward_layer(l, B, T, ex, stats));
  SAL_GPU_TRY(kc::rmsnorm_forward(ctx_, x_final_.get(), emb.at(el.lnf_g), xf_.get(), rstdf_.get(), N, D, d.norm_eps));
  return head_forward(N);
}

// logits = xf head (untied, head [D,V]) or xf tok^T (tied).
Status MoeLlamaCuda::head_forward(int N) {
  const Dims& d = p_.dims();
  const int D = d.d, V = d.vocab;
  DeviceUnit& emb = p_.embedding();
  const EmbeddingLayout el = embedding_layout(d);
  const bool untied = el.head.size > 0;
  const Slice table = untied ? el.head : el.tok;
  if (p_.bf16_head()) {
    SAL_GPU_TRY(kc::to_bf16(ctx_, xf_.get(), xf16_.get(), size_t(N) * D));
    return gpu_status(
        kc::gemm(ctx_, false, !untied, N, V, D, 1.0f, xf16_.get(), emb.at16(table), 0.0f, logits_.get()));
  }
  return gpu_status(kc::gemm_f32(ctx_, false, !untied, N, V, D, 1.0f, xf_.get(), emb.at(table), 0.0f, logits_.get()));
}

std::array<MoeLlamaCuda::QkPart, 2> MoeLlamaCuda::qk_parts(int l) {
  const Dims& d = p_.dims();
  const DenseLayout dl = dense_layout(d);
  LayerActs& a = acts_[size_t(l)];
  return {QkPart{0, d.d, dl.q_norm, a.q_raw.get(), a.q_rstd.get()},
          QkPart{d.d, d.kv(), dl.k_norm, a.k_raw.get(), a.k_rstd.get()}};
}

// QK-norm: the queries (over D) and keys (over KV) RMS-normalised with their gains, in place in
// a.qkv; the raw ones and their rstd kept for the backward.
Status MoeLlamaCuda::qk_norm_forward(int l, int N) {
  const Dims& d = p_.dims();
  const int in = d.d + 2 * d.kv();
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  for (const QkPart& part : qk_parts(l)) {
    float* cols = a.qkv.get() + part.off;
    SAL_GPU_TRY(copy_cols(ctx_, part.raw, size_t(part.width), cols, size_t(in), part.width, N,
                          "cudaMemcpy2DAsync (QK-norm take)"));
    SAL_GPU_TRY(kc::rmsnorm_forward(ctx_, part.raw, u.at(part.gain), cols_.get(), part.rstd, N, part.width,
                                    d.norm_eps));
    SAL_GPU_TRY(copy_cols(ctx_, cols, size_t(in), cols_.get(), size_t(part.width), part.width, N,
                          "cudaMemcpy2DAsync (QK-norm put)"));
  }
  return {};
}

// h1 = RMSNorm1(x); qkv = h1 Wqkv (+ b); QK-norm; rotary positions on q and k; the key/value heads
// widened for grouped-query attention; att = attention; xmid = att Wo + x.
Status MoeLlamaCuda::attention_forward(int l, int B, int T) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d, KV = d.kv(), in = D + 2 * KV, hd = d.head_dim();
  const float theta = float(d.rope_theta);
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  const DenseLayout dl = dense_layout(d);
  const size_t ND = size_t(N) * D;
  SAL_GPU_TRY(kc::rmsnorm_forward(ctx_, a.x.get(), u.at(dl.ln1_g), h1_.get(), a.rstd1.get(), N, D, d.norm_eps));
  SAL_GPU_TRY(kc::to_bf16(ctx_, h1_.get(), a.h1_16.get(), ND));
  SAL_GPU_TRY(kc::gemm(ctx_, false, false, N, in, D, 1.0f, a.h1_16.get(), u.at16(dl.w_qkv), 0.0f, a.qkv.get()));
  if (dl.b_qkv.size) SAL_GPU_TRY(kc::add_bias(ctx_, a.qkv.get(), u.at(dl.b_qkv), N, in));
  if (d.qk_norm) SAL_TRY(qk_norm_forward(l, N));
  SAL_GPU_TRY(kc::rope_forward(ctx_, a.qkv.get(), N, T, in, 0, d.heads, hd, theta));
  SAL_GPU_TRY(kc::rope_forward(ctx_, a.qkv.get(), N, T, in, D, d.kv_heads(), hd, theta));
  const bool grouped = KV < D;
  if (grouped) SAL_GPU_TRY(kc::expand_kv_heads(ctx_, a.qkv.get(), a.full.get(), N, D, KV, hd));
  SAL_GPU_TRY(kc::attention_forward(ctx_, grouped ? a.full.get() : a.qkv.get(), att_.get(), a.att_probs.get(), B, T, D,
                                    d.heads, att_scratch_.get(), att_scratch_.size()));
  SAL_GPU_TRY(kc::to_bf16(ctx_, att_.get(), a.att16.get(), ND));
  SAL_GPU_TRY(kc::gemm(ctx_, false, false, N, D, D, 1.0f, a.att16.get(), u.at16(dl.w_o), 0.0f, a.xmid.get()));
  return gpu_status(kc::add(ctx_, a.xmid.get(), a.x.get(), a.xmid.get(), ND));
}

// The router: scores, the top k, the combine weights, the balancing statistics over the global
// batch (one host round trip, with the logsumexps of the z-loss), and the experts' combined output
// (moe_out_) through the exchange.
Status MoeLlamaCuda::route(int l, int N, DeviceExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims();
  const int D = d.d, E = d.experts, K = d.top_k;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& g = p_.gate(l);
  SAL_GPU_TRY(kc::gemm_f32(ctx_, false, false, N, E, D, 1.0f, a.h2.get(), g.at(gate_layout(d).w), 0.0f, a.z.get()));
  if (d.sigmoid_router)
    SAL_GPU_TRY(kc::sigmoid_forward(ctx_, a.z.get(), a.scores.get(), size_t(N) * E));
  else
    SAL_GPU_TRY(kc::softmax_forward(ctx_, a.z.get(), a.scores.get(), N, E));
  if (N > 0) SAL_GPU_TRY(kc::topk(ctx_, a.scores.get(), N, E, K, a.idx.get(), a.chosen.get()));
  SAL_GPU_TRY(kc::topk_weights(ctx_, a.chosen.get(), a.w.get(), N, K, d.norm_topk));
  // the Switch balancing loss over the global batch, on the normalised scores
  const float* balanced = a.scores.get();
  if (d.sigmoid_router) {
    SAL_GPU_TRY(kc::normalise_rows(ctx_, a.scores.get(), normalised_.get(), N, E));
    balanced = normalised_.get();
  }
  SAL_GPU_TRY(kc::count_assignments(ctx_, a.idx.get(), N, K, E, a.counts.get()));
  SAL_GPU_TRY(kc::column_sums_f64(ctx_, balanced, N, E, prob_sums_.get()));
  SAL_GPU_TRY(kc::row_logsumexp(ctx_, a.z.get(), a.lse.get(), N, E));
  counts_host_.assign(size_t(E), 0);
  prob_sums_host_.assign(size_t(E), 0.0);
  lse_host_.assign(size_t(N), 0.0f);
  SAL_GPU_TRY(download_async(ctx_, counts_host_.data(), a.counts.get(), size_t(E), "cudaMemcpyAsync (expert counts)"));
  SAL_GPU_TRY(download_async(ctx_, prob_sums_host_.data(), prob_sums_.get(), size_t(E), "cudaMemcpyAsync (scores)"));
  SAL_GPU_TRY(download_async(ctx_, lse_host_.data(), a.lse.get(), size_t(N), "cudaMemcpyAsync (logsumexp)"));
  SAL_GPU_TRY(ctx_.synchronize());
  std::vector<double> counts(static_cast<size_t>(E), 0.0), prob_sums = prob_sums_host_;
  for (int e = 0; e < E; ++e) {
    counts[size_t(e)] = double(counts_host_[size_t(e)]);
    stats.expert_counts[size_t(l)][size_t(e)] = counts_host_[size_t(e)];
  }
  double tokens = N;
  SAL_TRY(ex.global_stats(l, counts, prob_sums, tokens));
  std::vector<double> f(static_cast<size_t>(E), 0.0);
  double loss = 0;
  for (int e = 0; e < E; ++e) {
    f[size_t(e)] = tokens > 0 ? counts[size_t(e)] / (double(K) * tokens) : 0.0;
    loss += f[size_t(e)] * (tokens > 0 ? prob_sums[size_t(e)] / tokens : 0.0);
  }
  a.global_tokens = tokens;
  stats.aux += aux_share_ * double(d.aux_weight) * E * loss;
  for (int t = 0; t < N; ++t)
    stats.z_sum += double(d.z_loss_weight) * double(lse_host_[size_t(t)]) * lse_host_[size_t(t)];
  SAL_GPU_TRY(upload_async(ctx_, a.f.get(), f, "cudaMemcpyAsync (assignment shares)"));
  return ex.forward(l, routing(l, N), a.h2.get(), moe_out_.get());
}

// The shared experts over every token, added to `next`: ungated, or scaled per token by
// sigmoid(h2 . w_gate).
Status MoeLlamaCuda::shared_forward(int l, int N, float* next) {
  const Dims& d = p_.dims();
  const int D = d.d, S = d.shared_ffn;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  const DenseLayout dl = dense_layout(d);
  const kc::SwigluExpertParams w{u.at16(dl.sh_w13), u.at16(dl.sh_w2)};
  SAL_GPU_TRY(kc::swiglu_experts_forward(ctx_, 1, &N, D, S, &w, a.h2.get(), a.shared_out.get(),
                                         kc::SwigluSaved{a.shared_x16.get(), a.shared_h.get()}, shared_scratch_.get(),
                                         shared_scratch_.size()));
  if (!dl.sh_gate.size) return gpu_status(kc::add(ctx_, next, a.shared_out.get(), next, size_t(N) * D));
  SAL_GPU_TRY(kc::gemm_f32(ctx_, false, false, N, 1, D, 1.0f, a.h2.get(), u.at(dl.sh_gate), 0.0f, zg_.get()));
  return gpu_status(kc::shared_gate_forward(ctx_, zg_.get(), a.shared_out.get(), next, a.shared_g.get(), N, D));
}

Status MoeLlamaCuda::forward_layer(int l, int B, int T, DeviceExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  const DenseLayout dl = dense_layout(d);
  SAL_TRY(attention_forward(l, B, T));
  SAL_GPU_TRY(kc::rmsnorm_forward(ctx_, a.xmid.get(), u.at(dl.ln2_g), a.h2.get(), a.rstd2.get(), N, D, d.norm_eps));
  SAL_TRY(route(l, N, ex, stats));
  float* next = (l + 1 < d.layers) ? acts_[size_t(l) + 1].x.get() : x_final_.get();
  SAL_GPU_TRY(kc::add(ctx_, a.xmid.get(), moe_out_.get(), next, size_t(N) * D));
  if (d.shared_ffn > 0) SAL_TRY(shared_forward(l, N, next));
  return {};
}

// dlogits (in the logits' buffer) -> the head's gradient and dxf_.
Status MoeLlamaCuda::head_backward(int N) {
  const Dims& d = p_.dims();
  const int D = d.d, V = d.vocab;
  DeviceUnit& emb = p_.embedding();
  const EmbeddingLayout el = embedding_layout(d);
  const bool untied = el.head.size > 0;
  const Slice table = untied ? el.head : el.tok;
  const float* dlogits = logits_.get();
  if (p_.bf16_head()) {
    SAL_GPU_TRY(kc::to_bf16(ctx_, dlogits, dlogits16_.get(), size_t(N) * V));
    if (untied)  // dHead += xf^T dlogits, dxf = dlogits head^T
      SAL_GPU_TRY(kc::gemm(ctx_, true, false, D, V, N, 1.0f, xf16_.get(), dlogits16_.get(), 1.0f, emb.grad(table)));
    else  // dtok += dlogits^T xf, dxf = dlogits tok
      SAL_GPU_TRY(kc::gemm(ctx_, true, false, V, D, N, 1.0f, dlogits16_.get(), xf16_.get(), 1.0f, emb.grad(table)));
    return gpu_status(
        kc::gemm(ctx_, false, untied, N, D, V, 1.0f, dlogits16_.get(), emb.at16(table), 0.0f, dxf_.get()));
  }
  if (untied)
    SAL_GPU_TRY(kc::gemm_f32(ctx_, true, false, D, V, N, 1.0f, xf_.get(), dlogits, 1.0f, emb.grad(table)));
  else
    SAL_GPU_TRY(kc::gemm_f32(ctx_, true, false, V, D, N, 1.0f, dlogits, xf_.get(), 1.0f, emb.grad(table)));
  return gpu_status(kc::gemm_f32(ctx_, false, untied, N, D, V, 1.0f, dlogits, emb.at(table), 0.0f, dxf_.get()));
}

Status MoeLlamaCuda::backward(int B, int T, DeviceExchange& ex) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d, V = d.vocab;
  DeviceUnit& emb = p_.embedding();
  const EmbeddingLayout el = embedding_layout(d);
  SAL_GPU_TRY(kc::cross_entropy_backward(ctx_, probs_.get(), tokens_.targets(), logits_.get(), N, V,
                                         float(1.0 / double(global_tokens_))));
  SAL_TRY(head_backward(N));
  SAL_GPU_TRY(kc::rmsnorm_backward(ctx_, dxf_.get(), x_final_.get(), emb.at(el.lnf_g), rstdf_.get(), dres_.get(),
                                   emb.grad(el.lnf_g), N, D, rms_scratch_.get()));
  for (int l = d.layers - 1; l >= 0; --l) SAL_TRY(backward_layer(l, B, T, ex));
  return gpu_status(kc::embedding_backward(ctx_, tokens_.ids(), dres_.get(), emb.grad(el.tok), nullptr, B, T, D, V));
}

// dh2_ (overwritten) from the layer output's gradient dres_ through the shared experts (and their
// gate); their weight gradients accumulate.
Status MoeLlamaCuda::shared_backward(int l, int N) {
  const Dims& d = p_.dims();
  const int D = d.d, S = d.shared_ffn;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  const DenseLayout dl = dense_layout(d);
  const kc::SwigluExpertParams w{u.at16(dl.sh_w13), u.at16(dl.sh_w2)};
  const kc::SwigluExpertGrads gr{u.grad(dl.sh_w13), u.grad(dl.sh_w2)};
  const kc::SwigluSaved saved{a.shared_x16.get(), a.shared_h.get()};
  const bool gated = dl.sh_gate.size > 0;
  if (gated)
    SAL_GPU_TRY(kc::shared_gate_backward(ctx_, a.shared_g.get(), a.shared_out.get(), dres_.get(), dshared_.get(),
                                         dzg_.get(), N, D));
  SAL_GPU_TRY(kc::swiglu_experts_backward(ctx_, 1, &N, D, S, &w, saved, gated ? dshared_.get() : dres_.get(),
                                          dh2_.get(), &gr, shared_scratch_.get(), shared_scratch_.size()));
  if (!gated) return {};
  SAL_GPU_TRY(kc::gemm_f32(ctx_, true, false, D, 1, N, 1.0f, a.h2.get(), dzg_.get(), 1.0f, u.grad(dl.sh_gate)));
  return gpu_status(kc::gemm_f32(ctx_, false, true, N, D, 1, 1.0f, dzg_.get(), u.at(dl.sh_gate), 1.0f, dh2_.get()));
}

// The router's gradient (the combine weights' in dw_, the balancing loss's, the z-loss's) back to
// the router logits and on to h2 (added into dh2_); the gate's weight gradient accumulates.
Status MoeLlamaCuda::router_backward(int l, int N) {
  const Dims& d = p_.dims();
  const int D = d.d, E = d.experts, K = d.top_k;
  LayerActs& a = acts_[size_t(l)];
  kc::RouterGrad g;
  g.scores = a.scores.get();
  g.chosen = a.chosen.get();
  g.w = a.w.get();
  g.idx = a.idx.get();
  g.dw = dw_.get();
  g.f = a.f.get();
  g.aux_scale = a.global_tokens > 0 ? aux_share_ * double(d.aux_weight) * E / a.global_tokens : 0.0;
  g.sigmoid = d.sigmoid_router;
  g.norm = d.norm_topk;
  const double z_scale = global_tokens_ > 0 ? 2.0 * double(d.z_loss_weight) / double(global_tokens_) : 0.0;
  SAL_GPU_TRY(kc::router_dscores(ctx_, g, N, E, K, dscores_.get()));
  SAL_GPU_TRY(kc::router_dlogits(ctx_, a.z.get(), a.scores.get(), dscores_.get(), a.lse.get(), z_scale,
                                 d.sigmoid_router, N, E, dz_.get()));
  DeviceUnit& gate = p_.gate(l);
  const Slice gw = gate_layout(d).w;
  SAL_GPU_TRY(kc::gemm_f32(ctx_, true, false, D, E, N, 1.0f, a.h2.get(), dz_.get(), 1.0f, gate.grad(gw)));
  return gpu_status(kc::gemm_f32(ctx_, false, true, N, D, E, 1.0f, dz_.get(), gate.at(gw), 1.0f, dh2_.get()));
}

// dqkv_: the gradient w.r.t. the normalised queries and keys on entry, the raw ones' on exit; the
// gains' gradients accumulate.
Status MoeLlamaCuda::qk_norm_backward(int l, int N) {
  const Dims& d = p_.dims();
  const int in = d.d + 2 * d.kv();
  DeviceUnit& u = p_.dense(l);
  for (const QkPart& part : qk_parts(l)) {
    float* cols = dqkv_.get() + part.off;
    SAL_GPU_TRY(copy_cols(ctx_, cols_.get(), size_t(part.width), cols, size_t(in), part.width, N,
                          "cudaMemcpy2DAsync (QK-norm take)"));
    SAL_GPU_TRY(kc::rmsnorm_backward(ctx_, cols_.get(), part.raw, u.at(part.gain), part.rstd, cols2_.get(),
                                     u.grad(part.gain), N, part.width, rms_scratch_.get()));
    SAL_GPU_TRY(copy_cols(ctx_, cols, size_t(in), cols2_.get(), size_t(part.width), part.width, N,
                          "cudaMemcpy2DAsync (QK-norm put)"));
  }
  return {};
}

// dxmid_ -> dh1_ through the output projection, the attention, the heads' repeats, the rotary
// positions, the QK-norm, the biases and the fused projection.
Status MoeLlamaCuda::attention_backward(int l, int B, int T) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d, KV = d.kv(), in = D + 2 * KV, hd = d.head_dim();
  const float theta = float(d.rope_theta);
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  const DenseLayout dl = dense_layout(d);
  const size_t ND = size_t(N) * D;
  SAL_GPU_TRY(kc::to_bf16(ctx_, dxmid_.get(), grad16_.get(), ND));
  SAL_GPU_TRY(kc::gemm(ctx_, true, false, D, D, N, 1.0f, a.att16.get(), grad16_.get(), 1.0f, u.grad(dl.w_o)));
  SAL_GPU_TRY(kc::gemm(ctx_, false, true, N, D, D, 1.0f, grad16_.get(), u.at16(dl.w_o), 0.0f, datt_.get()));
  const bool grouped = KV < D;
  SAL_GPU_TRY(kc::attention_backward(ctx_, datt_.get(), grouped ? a.full.get() : a.qkv.get(), a.att_probs.get(),
                                     grouped ? dfull_.get() : dqkv_.get(), B, T, D, d.heads, att_scratch_.get(),
                                     att_scratch_.size()));
  if (grouped) SAL_GPU_TRY(kc::collapse_kv_heads(ctx_, dfull_.get(), dqkv_.get(), N, D, KV, hd));
  SAL_GPU_TRY(kc::rope_backward(ctx_, dqkv_.get(), N, T, in, 0, d.heads, hd, theta));
  SAL_GPU_TRY(kc::rope_backward(ctx_, dqkv_.get(), N, T, in, D, d.kv_heads(), hd, theta));
  if (d.qk_norm) SAL_TRY(qk_norm_backward(l, N));
  if (dl.b_qkv.size) SAL_GPU_TRY(kc::bias_grad(ctx_, dqkv_.get(), u.grad(dl.b_qkv), N, in));
  SAL_GPU_TRY(kc::to_bf16(ctx_, dqkv_.get(), grad16_.get(), size_t(N) * in));
  SAL_GPU_TRY(kc::gemm(ctx_, true, false, D, in, N, 1.0f, a.h1_16.get(), grad16_.get(), 1.0f, u.grad(dl.w_qkv)));
  return gpu_status(kc::gemm(ctx_, false, true, N, D, in, 1.0f, grad16_.get(), u.at16(dl.w_qkv), 0.0f, dh1_.get()));
}

// dres_: gradient w.r.t. the layer's output stream on entry, w.r.t. its input stream on exit.
Status MoeLlamaCuda::backward_layer(int l, int B, int T, DeviceExchange& ex) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  const DenseLayout dl = dense_layout(d);
  const size_t ND = size_t(N) * D;
  // dh2 = the shared experts' input gradient + the routed experts' (+ the router's, below)
  if (d.shared_ffn > 0) {
    SAL_TRY(shared_backward(l, N));
    SAL_TRY(ex.backward(l, routing(l, N), dres_.get(), dmoe_.get(), dw_.get()));
    SAL_GPU_TRY(kc::add(ctx_, dh2_.get(), dmoe_.get(), dh2_.get(), ND));
  } else {
    SAL_TRY(ex.backward(l, routing(l, N), dres_.get(), dh2_.get(), dw_.get()));
  }
  SAL_TRY(router_backward(l, N));
  SAL_GPU_TRY(kc::rmsnorm_backward(ctx_, dh2_.get(), a.xmid.get(), u.at(dl.ln2_g), a.rstd2.get(), dxmid_.get(),
                                   u.grad(dl.ln2_g), N, D, rms_scratch_.get()));
  SAL_GPU_TRY(kc::add(ctx_, dxmid_.get(), dres_.get(), dxmid_.get(), ND));
  SAL_TRY(attention_backward(l, B, T));
  SAL_GPU_TRY(kc::rmsnorm_backward(ctx_, dh1_.get(), a.x.get(), u.at(dl.ln1_g), a.rstd1.get(), dres_.get(),
                                   u.grad(dl.ln1_g), N, D, rms_scratch_.get()));
  return gpu_status(kc::add(ctx_, dres_.get(), dxmid_.get(), dres_.get(), ND));
}

Result<StepStats> MoeLlamaCuda::step(const Batch& b, int64_t global_tokens, DeviceExchange& ex) {
  SAL_TRY(DeviceTokens::check_step(b, global_tokens));
  StepStats stats;
  stats.tokens = int64_t(b.sequences) * b.seq_len;
  global_tokens_ = global_tokens;
  aux_share_ = b.aux_share;
  SAL_TRY(forward(b.inputs, b.sequences, b.seq_len, ex, stats));
  SAL_TRY(tokens_.loss_forward(ctx_, logits_.get(), probs_.get(), b.targets, p_.dims().vocab));
  SAL_TRY(backward(b.sequences, b.seq_len, ex));
  auto ce = tokens_.finish(ctx_, p_.dims().vocab, true);
  if (!ce) return ce.error();
  stats.ce_sum = *ce;
  return stats;
}

Result<std::vector<float>> MoeLlamaCuda::next_logits(const std::vector<int32_t>& ids, DeviceExchange& ex) {
  SAL_TRY(DeviceTokens::check_sequence(ids));
  const int T = int(ids.size()), V = p_.dims().vocab;
  StepStats stats;
  global_tokens_ = T;
  SAL_TRY(forward(ids, 1, T, ex, stats));
  return tokens_.last_logits(ctx_, logits_.get(), T, V);
}

}  // namespace sal::model

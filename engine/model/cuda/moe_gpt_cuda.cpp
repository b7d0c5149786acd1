// moe_gpt_cuda.cpp — see moe_gpt_cuda.h. Notation as in model/moe_gpt.cpp: N = B*T local tokens,
// D = d_model, E experts, K top-k, V vocab, H heads. GEMMs are row-major: y = x W is
// gemm(N, out, in); dW += x^T dy; dx = dy W^T. Each step below names the CPU line it mirrors
// where the correspondence is not obvious.
#include "model/cuda/moe_gpt_cuda.h"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/moe_gate.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/permute.h"
#include "kernels/cuda/softmax.h"
#include "model/routing_trace.h"

namespace sal::model {
namespace {

bool forced(const Dims& d) { return d.skew != 1.0f && d.hot_experts > 0; }

}  // namespace

MoeGptCuda::MoeGptCuda(DeviceParams& p) : ctx_(p.context()), p_(p) {}

// Sizes every buffer for a batch of B sequences of T tokens (growing only).
Status MoeGptCuda::reserve(int B, int T) {
  const Dims& d = p_.dims();
  const size_t N = size_t(B) * size_t(T), D = size_t(d.d), E = size_t(d.experts), K = size_t(d.top_k),
               V = size_t(d.vocab), H = size_t(d.heads);
  const size_t probs = size_t(B) * H * size_t(T) * size_t(T);
  acts_.resize(size_t(d.layers));
  for (LayerActs& a : acts_) {
    for (auto [buf, n] : {std::pair{&a.x, N * D}, {&a.mean1, N}, {&a.rstd1, N}, {&a.qkv, N * 3 * D},
                          {&a.att_probs, probs}, {&a.xmid, N * D}, {&a.mean2, N}, {&a.rstd2, N}, {&a.h2, N * D},
                          {&a.gate_probs, N * E}, {&a.w, N * K}, {&a.aux, E}})
      SAL_GPU_TRY(ensure(ctx_, *buf, n));
    SAL_GPU_TRY(ensure(ctx_, a.h1_16, N * D));
    SAL_GPU_TRY(ensure(ctx_, a.att16, N * D));
    SAL_GPU_TRY(ensure(ctx_, a.idx, N * K));
    SAL_GPU_TRY(ensure(ctx_, a.counts, E));
  }
  for (auto [buf, n] : {std::pair{&x_final_, N * D}, {&xf_, N * D}, {&meanf_, N}, {&rstdf_, N}, {&logits_, N * V},
                        {&probs_, N * V}, {&h1_, N * D}, {&att_, N * D}, {&moe_out_, N * D}, {&gate_logits_, N * E},
                        {&dprobs_, N * E}, {&dw_, N * K}, {&dres_, N * D}, {&dxmid_, N * D}, {&datt_, N * D},
                        {&dqkv_, N * 3 * D}, {&dh1_, N * D}, {&dh2_, N * D}, {&dxf_, N * D},
                        {&ln_scratch_, kc::layernorm_backward_scratch_floats(int(N), int(D))}})
    SAL_GPU_TRY(ensure(ctx_, *buf, n));
  SAL_TRY(tokens_.reserve(ctx_, N));
  SAL_GPU_TRY(ensure(ctx_, prob_sums_, E));
  SAL_GPU_TRY(ensure(ctx_, grad16_, N * 3 * D));
  SAL_GPU_TRY(ensure(ctx_, att_scratch_, kc::attention_scratch_bytes(B, T, int(D), int(H))));
  if (p_.bf16_head()) {
    SAL_GPU_TRY(ensure(ctx_, xf16_, N * D));
    SAL_GPU_TRY(ensure(ctx_, dlogits16_, N * V));
  }
  return {};
}

// Experiments only (Dims::skew): the CPU model's draws (model::forced_experts). Only the expert ids
// are formed here; the combine weights are gathered from the gate's probabilities on the device,
// as the CPU reads them.
void MoeGptCuda::force_routing(int l, int N, int T, std::vector<int32_t>& idx) const {
  const int K = p_.dims().top_k;
  idx.assign(size_t(N) * size_t(K), 0);
  if (batch_ && batch_->routing)  // a replayed trace (model::RoutingTrace), as the CPU model routes
    batch_->routing->route(batch_->step, l, uint64_t(global_tokens_), K, uint64_t(batch_->first) * uint64_t(T), N,
                           idx.data());
  else
    forced_experts(p_.dims(), l, inputs_->data(), N, T, idx.data());
}

DeviceRouting MoeGptCuda::routing(int l, int N) const {
  const LayerActs& a = acts_[size_t(l)];
  return DeviceRouting{N, p_.dims().top_k, a.idx.get(), a.w.get(), a.counts.get()};
}

Status MoeGptCuda::forward(const std::vector<int32_t>& inputs, int B, int T, DeviceExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims();
  SAL_TRY(DeviceTokens::check_forward(inputs, B, T, d.seq_len));
  const int N = B * T, D = d.d;
  if (d.top_k < 1 || d.top_k > d.experts || d.top_k > kc::kMaxTopK)
    return fail("model.top_k = ", d.top_k, " (the GPU model takes 1 <= top_k <= min(experts, ", kc::kMaxTopK, "))");
  inputs_ = &inputs;
  SAL_TRY(reserve(B, T));
  DeviceUnit& emb = p_.embedding();
  const EmbeddingLayout el = embedding_layout(d);
  SAL_TRY(tokens_.upload_ids(ctx_, inputs));
  SAL_GPU_TRY(kc::embedding_forward(ctx_, tokens_.ids(), emb.at(el.tok), emb.at(el.pos), acts_[0].x.get(), B, T, D,
                                    d.vocab, tokens_.bad_ids()));
  stats.expert_counts.assign(size_t(d.layers), std::vector<uint32_t>(size_t(d.experts), 0));
  for (int l = 0; l < d.layers; ++l) SAL_TRY(forward_layer(l, B, T, ex, stats));
  // final LayerNorm and the tied LM head: logits = xf tok^T
  SAL_GPU_TRY(kc::layernorm_forward(ctx_, x_final_.get(), emb.at(el.lnf_g), emb.at(el.lnf_b), xf_.get(),
                                    meanf_.get(), rstdf_.get(), N, D));
  if (p_.bf16_head()) {
    SAL_GPU_TRY(kc::to_bf16(ctx_, xf_.get(), xf16_.get(), size_t(N) * D));
    SAL_GPU_TRY(kc::gemm(ctx_, false, true, N, d.vocab, D, 1.0f, xf16_.get(), emb.at16(el.tok), 0.0f, logits_.get()));
  } else {
    SAL_GPU_TRY(kc::gemm_f32(ctx_, false, true, N, d.vocab, D, 1.0f, xf_.get(), emb.at(el.tok), 0.0f, logits_.get()));
  }
  return {};
}

Status MoeGptCuda::forward_layer(int l, int B, int T, DeviceExchange& ex, StepStats& stats) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d, E = d.experts, K = d.top_k;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  DeviceUnit& g = p_.gate(l);
  const DenseLayout dl = dense_layout(d);
  const GateLayout gl = gate_layout(d);
  const size_t ND = size_t(N) * D;

  // attention sub-block: h1 = LN1(x); qkv = h1 Wqkv + b; att = attention(qkv); xmid = att Wo + b + x
  SAL_GPU_TRY(kc::layernorm_forward(ctx_, a.x.get(), u.at(dl.ln1_g), u.at(dl.ln1_b), h1_.get(), a.mean1.get(),
                                    a.rstd1.get(), N, D));
  SAL_GPU_TRY(kc::to_bf16(ctx_, h1_.get(), a.h1_16.get(), ND));
  SAL_GPU_TRY(kc::gemm(ctx_, false, false, N, 3 * D, D, 1.0f, a.h1_16.get(), u.at16(dl.w_qkv), 0.0f, a.qkv.get()));
  SAL_GPU_TRY(kc::add_bias(ctx_, a.qkv.get(), u.at(dl.b_qkv), N, 3 * D));
  SAL_GPU_TRY(kc::attention_forward(ctx_, a.qkv.get(), att_.get(), a.att_probs.get(), B, T, D, d.heads,
                                    att_scratch_.get(), att_scratch_.size()));
  SAL_GPU_TRY(kc::to_bf16(ctx_, att_.get(), a.att16.get(), ND));
  SAL_GPU_TRY(kc::gemm(ctx_, false, false, N, D, D, 1.0f, a.att16.get(), u.at16(dl.w_o), 0.0f, a.xmid.get()));
  SAL_GPU_TRY(kc::add_bias(ctx_, a.xmid.get(), u.at(dl.b_o), N, D));
  SAL_GPU_TRY(kc::add(ctx_, a.xmid.get(), a.x.get(), a.xmid.get(), ND));

  // gate and top-k, in fp32
  SAL_GPU_TRY(kc::layernorm_forward(ctx_, a.xmid.get(), u.at(dl.ln2_g), u.at(dl.ln2_b), a.h2.get(), a.mean2.get(),
                                    a.rstd2.get(), N, D));
  SAL_GPU_TRY(kc::gemm_f32(ctx_, false, false, N, E, D, 1.0f, a.h2.get(), g.at(gl.w), 0.0f, gate_logits_.get()));
  SAL_GPU_TRY(kc::softmax_forward(ctx_, gate_logits_.get(), a.gate_probs.get(), N, E));
  if (N > 0) SAL_GPU_TRY(kc::topk(ctx_, a.gate_probs.get(), N, E, K, a.idx.get(), a.w.get()));
  if (forced(d) || (batch_ && batch_->routing)) {
    force_routing(l, N, T, a.idx_host);
    SAL_GPU_TRY(upload_async(ctx_, a.idx.get(), a.idx_host, "cudaMemcpyAsync (forced routing)"));
    SAL_GPU_TRY(kc::gather_weights(ctx_, a.gate_probs.get(), a.idx.get(), N, K, E, a.w.get()));
  }

  // the balancing loss over the global batch: aux = alpha * E * sum_e f_e * P_e
  SAL_GPU_TRY(kc::count_assignments(ctx_, a.idx.get(), N, K, E, a.counts.get()));
  SAL_GPU_TRY(kc::column_sums_f64(ctx_, a.gate_probs.get(), N, E, prob_sums_.get()));
  counts_host_.assign(size_t(E), 0);
  prob_sums_host_.assign(size_t(E), 0.0);
  SAL_GPU_TRY(download_async(ctx_, counts_host_.data(), a.counts.get(), size_t(E), "cudaMemcpyAsync (expert counts)"));
  SAL_GPU_TRY(download_async(ctx_, prob_sums_host_.data(), prob_sums_.get(), size_t(E), "cudaMemcpyAsync (prob sums)"));
  SAL_GPU_TRY(ctx_.synchronize());
  std::vector<double> counts(static_cast<size_t>(E), 0.0), prob_sums = prob_sums_host_;
  for (int e = 0; e < E; ++e) {
    counts[size_t(e)] = double(counts_host_[size_t(e)]);
    stats.expert_counts[size_t(l)][size_t(e)] = counts_host_[size_t(e)];
  }
  double tokens = N;
  SAL_TRY(ex.global_stats(l, counts, prob_sums, tokens));
  double aux = 0;
  std::vector<double> f(size_t(E), 0.0);
  for (int e = 0; e < E; ++e) {
    f[size_t(e)] = tokens > 0 ? counts[size_t(e)] / (double(K) * tokens) : 0.0;
    aux += f[size_t(e)] * (tokens > 0 ? prob_sums[size_t(e)] / tokens : 0.0);
  }
  stats.aux += aux_share_ * double(d.aux_weight) * E * aux;
  // its gradient w.r.t. each token's probability of e (moe_gpt.cpp backward_gate): aux_scale * f_e
  const double aux_scale = tokens > 0 ? aux_share_ * double(d.aux_weight) * E / tokens : 0.0;
  a.aux_host.assign(size_t(E), 0.0f);
  for (int e = 0; e < E; ++e) a.aux_host[size_t(e)] = float(aux_scale * f[size_t(e)]);
  SAL_GPU_TRY(upload_async(ctx_, a.aux.get(), a.aux_host, "cudaMemcpyAsync (aux gradient)"));

  // experts and the gate-weighted combine, then the residual: next = xmid + combine
  SAL_TRY(ex.forward(l, routing(l, N), a.h2.get(), moe_out_.get()));
  float* next = (l + 1 < d.layers) ? acts_[size_t(l) + 1].x.get() : x_final_.get();
  SAL_GPU_TRY(kc::add(ctx_, a.xmid.get(), moe_out_.get(), next, ND));
  return {};
}

Status MoeGptCuda::backward(int B, int T, int64_t global_tokens, DeviceExchange& ex) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d, V = d.vocab;
  DeviceUnit& emb = p_.embedding();
  const EmbeddingLayout el = embedding_layout(d);
  // cross-entropy -> d logits (into the logits buffer, no longer needed)
  float* dlogits = logits_.get();
  SAL_GPU_TRY(kc::cross_entropy_backward(ctx_, probs_.get(), tokens_.targets(), dlogits, N, V,
                                         float(1.0 / double(global_tokens))));
  // the tied head: dtok += dlogits^T xf, dxf = dlogits tok
  if (p_.bf16_head()) {
    SAL_GPU_TRY(kc::to_bf16(ctx_, dlogits, dlogits16_.get(), size_t(N) * V));
    SAL_GPU_TRY(kc::gemm(ctx_, true, false, V, D, N, 1.0f, dlogits16_.get(), xf16_.get(), 1.0f, emb.grad(el.tok)));
    SAL_GPU_TRY(kc::gemm(ctx_, false, false, N, D, V, 1.0f, dlogits16_.get(), emb.at16(el.tok), 0.0f, dxf_.get()));
  } else {
    SAL_GPU_TRY(kc::gemm_f32(ctx_, true, false, V, D, N, 1.0f, dlogits, xf_.get(), 1.0f, emb.grad(el.tok)));
    SAL_GPU_TRY(kc::gemm_f32(ctx_, false, false, N, D, V, 1.0f, dlogits, emb.at(el.tok), 0.0f, dxf_.get()));
  }
  SAL_GPU_TRY(kc::layernorm_backward(ctx_, dxf_.get(), x_final_.get(), emb.at(el.lnf_g), meanf_.get(), rstdf_.get(),
                                     dres_.get(), emb.grad(el.lnf_g), emb.grad(el.lnf_b), N, D, ln_scratch_.get()));
  for (int l = d.layers - 1; l >= 0; --l) SAL_TRY(backward_layer(l, B, T, ex));
  SAL_GPU_TRY(kc::embedding_backward(ctx_, tokens_.ids(), dres_.get(), emb.grad(el.tok), emb.grad(el.pos), B, T, D, V));
  return {};
}

// dres_: gradient w.r.t. the layer's output stream on entry, w.r.t. its input stream on exit.
Status MoeGptCuda::backward_layer(int l, int B, int T, DeviceExchange& ex) {
  const Dims& d = p_.dims();
  const int N = B * T, D = d.d, E = d.experts, K = d.top_k;
  LayerActs& a = acts_[size_t(l)];
  DeviceUnit& u = p_.dense(l);
  DeviceUnit& g = p_.gate(l);
  const DenseLayout dl = dense_layout(d);
  const GateLayout gl = gate_layout(d);
  const size_t ND = size_t(N) * D;

  // MoE combine and experts: dh2 = experts' input gradients summed per token, dw = d(combine weight)
  SAL_TRY(ex.backward(l, routing(l, N), dres_.get(), dh2_.get(), dw_.get()));
  // the gate: dprobs = aux term + dw at the chosen experts; back through the softmax (in place);
  // dWg += h2^T dlogits; dh2 += dlogits Wg^T
  SAL_GPU_TRY(kc::gate_dprobs(ctx_, a.aux.get(), a.idx.get(), dw_.get(), N, K, E, dprobs_.get()));
  SAL_GPU_TRY(kc::softmax_backward(ctx_, a.gate_probs.get(), dprobs_.get(), dprobs_.get(), N, E));
  SAL_GPU_TRY(kc::gemm_f32(ctx_, true, false, D, E, N, 1.0f, a.h2.get(), dprobs_.get(), 1.0f, g.grad(gl.w)));
  SAL_GPU_TRY(kc::gemm_f32(ctx_, false, true, N, D, E, 1.0f, dprobs_.get(), g.at(gl.w), 1.0f, dh2_.get()));
  // LayerNorm 2: d xmid = dres (residual) + LN2'(dh2)
  SAL_GPU_TRY(kc::layernorm_backward(ctx_, dh2_.get(), a.xmid.get(), u.at(dl.ln2_g), a.mean2.get(), a.rstd2.get(),
                                     dxmid_.get(), u.grad(dl.ln2_g), u.grad(dl.ln2_b), N, D, ln_scratch_.get()));
  SAL_GPU_TRY(kc::add(ctx_, dxmid_.get(), dres_.get(), dxmid_.get(), ND));
  // attention output projection: dWo += att^T dxmid, db_o += colsum, datt = dxmid Wo^T
  SAL_GPU_TRY(kc::to_bf16(ctx_, dxmid_.get(), grad16_.get(), ND));
  SAL_GPU_TRY(kc::gemm(ctx_, true, false, D, D, N, 1.0f, a.att16.get(), grad16_.get(), 1.0f, u.grad(dl.w_o)));
  SAL_GPU_TRY(kc::bias_grad(ctx_, dxmid_.get(), u.grad(dl.b_o), N, D));
  SAL_GPU_TRY(kc::gemm(ctx_, false, true, N, D, D, 1.0f, grad16_.get(), u.at16(dl.w_o), 0.0f, datt_.get()));
  // attention, then the qkv projection: dWqkv += h1^T dqkv, db_qkv += colsum, dh1 = dqkv Wqkv^T
  SAL_GPU_TRY(kc::attention_backward(ctx_, datt_.get(), a.qkv.get(), a.att_probs.get(), dqkv_.get(), B, T, D, d.heads,
                                     att_scratch_.get(), att_scratch_.size()));
  SAL_GPU_TRY(kc::to_bf16(ctx_, dqkv_.get(), grad16_.get(), 3 * ND));
  SAL_GPU_TRY(kc::gemm(ctx_, true, false, D, 3 * D, N, 1.0f, a.h1_16.get(), grad16_.get(), 1.0f, u.grad(dl.w_qkv)));
  SAL_GPU_TRY(kc::bias_grad(ctx_, dqkv_.get(), u.grad(dl.b_qkv), N, 3 * D));
  SAL_GPU_TRY(kc::gemm(ctx_, false, true, N, D, 3 * D, 1.0f, grad16_.get(), u.at16(dl.w_qkv), 0.0f, dh1_.get()));
  // LayerNorm 1 (into dres), plus the residual
  SAL_GPU_TRY(kc::layernorm_backward(ctx_, dh1_.get(), a.x.get(), u.at(dl.ln1_g), a.mean1.get(), a.rstd1.get(),
                                     dres_.get(), u.grad(dl.ln1_g), u.grad(dl.ln1_b), N, D, ln_scratch_.get()));
  SAL_GPU_TRY(kc::add(ctx_, dres_.get(), dxmid_.get(), dres_.get(), ND));
  return {};
}

Result<StepStats> MoeGptCuda::step(const Batch& b, int64_t global_tokens, DeviceExchange& ex) {
  SAL_TRY(DeviceTokens::check_step(b, global_tokens));
  StepStats stats;
  stats.tokens = int64_t(b.sequences) * b.seq_len;
  batch_ = &b;
  global_tokens_ = global_tokens;
  aux_share_ = b.aux_share;
  struct Clear {
    const Batch*& b;
    ~Clear() { b = nullptr; }
  } clear{batch_};
  SAL_TRY(forward(b.inputs, b.sequences, b.seq_len, ex, stats));
  SAL_TRY(tokens_.loss_forward(ctx_, logits_.get(), probs_.get(), b.targets, p_.dims().vocab));
  SAL_TRY(backward(b.sequences, b.seq_len, global_tokens, ex));
  auto ce = tokens_.finish(ctx_, p_.dims().vocab, true);
  if (!ce) return ce.error();
  stats.ce_sum = *ce;
  return stats;
}

Result<std::vector<float>> MoeGptCuda::next_logits(const std::vector<int32_t>& ids, DeviceExchange& ex) {
  SAL_TRY(DeviceTokens::check_sequence(ids));
  const int T = int(ids.size()), V = p_.dims().vocab;
  StepStats stats;
  SAL_TRY(forward(ids, 1, T, ex, stats));
  return tokens_.last_logits(ctx_, logits_.get(), T, V);
}

}  // namespace sal::model

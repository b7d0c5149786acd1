// hf_layout.cpp — see hf_layout.h.
#include "ckpt/hf_layout.h"

namespace sal::ckpt {
namespace {

// A vector (a norm's gain) stored as it is.
HfTensor gain(std::string name, UnitId unit, Slice s) {
  return {std::move(name), unit, s, 1, int64_t(s.size), 0, int64_t(s.size), false};
}

// Columns [col0, col0 + n) of our [rows, cols] matrix, HF's [n, rows] (transposed) or [rows, n].
HfTensor block(std::string name, UnitId unit, Slice s, int64_t rows, int64_t cols, int64_t col0, int64_t n,
               bool transpose = true) {
  return {std::move(name), unit, s, rows, cols, col0, n, transpose};
}

void add_dense(std::vector<HfTensor>& out, const Dims& d, int l, const std::string& at) {
  const UnitId u{UnitKind::dense, l, -1};
  const auto dl = dense_layout(d);
  const int64_t D = d.d, KV = d.kv(), QKV = D + 2 * KV, S = d.shared_ffn;
  out.push_back(gain(at + "input_layernorm.weight", u, dl.ln1_g));
  out.push_back(block(at + "self_attn.q_proj.weight", u, dl.w_qkv, D, QKV, 0, D));
  out.push_back(block(at + "self_attn.k_proj.weight", u, dl.w_qkv, D, QKV, D, KV));
  out.push_back(block(at + "self_attn.v_proj.weight", u, dl.w_qkv, D, QKV, D + KV, KV));
  if (d.attn_bias) {  // Qwen2's: vectors, stored as they are
    out.push_back(block(at + "self_attn.q_proj.bias", u, dl.b_qkv, 1, QKV, 0, D, false));
    out.push_back(block(at + "self_attn.k_proj.bias", u, dl.b_qkv, 1, QKV, D, KV, false));
    out.push_back(block(at + "self_attn.v_proj.bias", u, dl.b_qkv, 1, QKV, D + KV, KV, false));
  }
  out.push_back(block(at + "self_attn.o_proj.weight", u, dl.w_o, D, D, 0, D));
  if (d.qk_norm) {
    out.push_back(gain(at + "self_attn.q_norm.weight", u, dl.q_norm));
    out.push_back(gain(at + "self_attn.k_norm.weight", u, dl.k_norm));
  }
  out.push_back(gain(at + "post_attention_layernorm.weight", u, dl.ln2_g));
  if (S == 0) return;
  // DeepSeek's ungated shared experts, or Qwen2-MoE's one gated shared expert
  const std::string sh = at + (d.shared_gate ? "mlp.shared_expert." : "mlp.shared_experts.");
  if (d.shared_gate) out.push_back(block(at + "mlp.shared_expert_gate.weight", u, dl.sh_gate, D, 1, 0, 1));
  out.push_back(block(sh + "gate_proj.weight", u, dl.sh_w13, D, 2 * S, 0, S));
  out.push_back(block(sh + "up_proj.weight", u, dl.sh_w13, D, 2 * S, S, S));
  out.push_back(block(sh + "down_proj.weight", u, dl.sh_w2, S, D, 0, D));
}

void add_moe(std::vector<HfTensor>& out, const Dims& d, int l, const std::string& at, HfNaming naming) {
  const int64_t D = d.d, F = d.ffn(), E = d.experts;
  const bool mixtral = naming == HfNaming::mixtral;
  const std::string moe = at + (mixtral ? "block_sparse_moe." : "mlp.");
  out.push_back(block(moe + "gate.weight", {UnitKind::gate, l, -1}, gate_layout(d).w, D, E, 0, E));
  if (d.router_bias) out.push_back(gain(moe + "gate.e_score_correction_bias", {UnitKind::gate, l, -1}, gate_layout(d).bias));
  const auto xl = expert_layout(d);
  for (int e = 0; e < d.experts; ++e) {
    const UnitId u{UnitKind::expert, l, e};
    const std::string x = moe + "experts." + std::to_string(e) + ".";
    out.push_back(block(x + (mixtral ? "w1.weight" : "gate_proj.weight"), u, xl.w1, D, 2 * F, 0, F));
    out.push_back(block(x + (mixtral ? "w3.weight" : "up_proj.weight"), u, xl.w1, D, 2 * F, F, F));
    out.push_back(block(x + (mixtral ? "w2.weight" : "down_proj.weight"), u, xl.w2, F, D, 0, D));
  }
}

}  // namespace

std::vector<int64_t> HfTensor::shape() const {
  if (rows == 1 && !transpose) return {ncols};
  return transpose ? std::vector<int64_t>{ncols, rows} : std::vector<int64_t>{rows, ncols};
}

std::vector<HfTensor> hf_tensors(const Dims& d, HfNaming naming) {
  std::vector<HfTensor> out;
  const UnitId emb{UnitKind::embedding, -1, -1};
  const auto el = embedding_layout(d);
  out.push_back(block("model.embed_tokens.weight", emb, el.tok, d.vocab, d.d, 0, d.d, false));
  for (int l = 0; l < d.layers; ++l) {
    const std::string at = "model.layers." + std::to_string(l) + ".";
    add_dense(out, d, l, at);
    add_moe(out, d, l, at, naming);
  }
  out.push_back(gain("model.norm.weight", emb, el.lnf_g));
  if (el.head.size) out.push_back(block("lm_head.weight", emb, el.head, d.d, d.vocab, 0, d.vocab));
  return out;
}

void to_hf(const HfTensor& t, const float* unit, float* out) {
  const float* m = unit + t.slice.offset;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.ncols; ++c) {
      const float v = m[r * t.cols + t.col0 + c];
      if (t.transpose) out[c * t.rows + r] = v;
      else out[r * t.ncols + c] = v;
    }
}

void from_hf(const HfTensor& t, const float* in, float* unit) {
  float* m = unit + t.slice.offset;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.ncols; ++c)
      m[r * t.cols + t.col0 + c] = t.transpose ? in[c * t.rows + r] : in[r * t.ncols + c];
}

}  // namespace sal::ckpt

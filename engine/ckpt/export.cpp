// export.cpp — see export.h.
#include "ckpt/export.h"

#include <cstdio>
#include <filesystem>

#include "ckpt/hf_config.h"
#include "core/paths.h"
#include "kernels/cpu/norm.h"
#include "model/optimizer.h"

namespace sal::ckpt {
namespace {

// One named tensor inside a unit's flat buffer.
struct Part {
  std::string name;
  Slice slice;
  std::vector<int64_t> shape;
};

std::vector<Part> embedding_parts(const Dims& d) {
  auto l = embedding_layout(d);
  const int64_t V = d.vocab, T = d.seq_len, D = d.d;
  return {{"embed.tokens", l.tok, {V, D}},
          {"embed.positions", l.pos, {T, D}},
          {"final_norm.weight", l.lnf_g, {D}},
          {"final_norm.bias", l.lnf_b, {D}}};
}

std::vector<Part> dense_parts(const Dims& d, const std::string& at) {
  auto l = dense_layout(d);
  const int64_t D = d.d;
  return {{at + "ln1.weight", l.ln1_g, {D}},       {at + "ln1.bias", l.ln1_b, {D}},
          {at + "attn.w_qkv", l.w_qkv, {D, 3 * D}}, {at + "attn.b_qkv", l.b_qkv, {3 * D}},
          {at + "attn.w_o", l.w_o, {D, D}},         {at + "attn.b_o", l.b_o, {D}},
          {at + "ln2.weight", l.ln2_g, {D}},       {at + "ln2.bias", l.ln2_b, {D}}};
}

std::vector<Part> expert_parts(const Dims& d, const std::string& at) {
  auto l = expert_layout(d);
  const int64_t D = d.d, F = d.ffn();
  return {{at + "w1", l.w1, {D, F}}, {at + "b1", l.b1, {F}}, {at + "w2", l.w2, {F, D}}, {at + "b2", l.b2, {D}}};
}

std::vector<Part> unit_parts(const Dims& d, const UnitId& id) {
  const std::string layer = "layers." + std::to_string(id.layer) + ".";
  switch (id.kind) {
    case UnitKind::embedding: return embedding_parts(d);
    case UnitKind::dense: return dense_parts(d, layer);
    case UnitKind::gate: return {{layer + "gate.w", gate_layout(d).w, {d.d, d.experts}}};
    case UnitKind::expert: return expert_parts(d, layer + "experts." + std::to_string(id.expert) + ".");
  }
  return {};
}

// Every part of every unit p holds, reading the buffer `field` (weights or a moment) of each unit.
void append_tensors(const Params& p, std::vector<float> Unit::*field, const std::string& prefix,
                    std::vector<NamedTensor>& out) {
  for (const UnitId& id : model_units(p.dims)) {
    const Unit* u = p.unit(id);
    if (!u) continue;
    for (auto& part : unit_parts(p.dims, id))
      out.push_back({prefix + part.name, part.shape, (u->*field).data() + part.slice.offset});
  }
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// moe-llama: every HF tensor of the buffer `field`, rearranged.
void append_hf_tensors(const Params& p, std::vector<float> Unit::*field, const std::string& prefix, ExportTensors& out) {
  for (const HfTensor& t : hf_tensors(p.dims, export_naming(p.dims))) {
    const Unit* u = p.unit(t.unit);
    if (!u) continue;
    std::vector<float> values(t.elements());
    to_hf(t, (u->*field).data(), values.data());
    out.owned.push_back(std::move(values));
    out.tensors.push_back({prefix + t.name, t.shape(), nullptr});
  }
}

}  // namespace

ExportTensors model_tensors(const Params& p, bool optimizer) {
  ExportTensors out;
  std::vector<std::pair<std::vector<float> Unit::*, const char*>> fields = {{&Unit::w, ""}};
  if (optimizer) fields.insert(fields.end(), {{&Unit::m, "optim.exp_avg."}, {&Unit::v, "optim.exp_avg_sq."}});
  for (auto [field, prefix] : fields) {
    if (p.dims.llama()) append_hf_tensors(p, field, prefix, out);
    else append_tensors(p, field, prefix, out.tensors);
  }
  for (size_t i = 0; i < out.owned.size(); ++i) out.tensors[i].data = out.owned[i].data();  // every tensor is owned
  return out;
}

std::map<std::string, std::string> model_metadata(const Manifest& m, bool optimizer) {
  const Dims& d = m.dims;
  // Manifests from before the tokens line: byte-level data is the job's default, and needs vocab 256.
  std::string tokens = !m.tokens.empty() ? m.tokens : d.vocab == 256 ? "bytes" : "uint16";
  if (d.llama()) {  // the configuration is config.json's
    std::map<std::string, std::string> meta{{"model", "moe-llama"},
                                            {"exporter", std::string("salamander ") + SAL_VERSION},
                                            {"step", std::to_string(m.step)},
                                            {"tokens", tokens},
                                            {"layout", "huggingface"},
                                            {"matrix_layout", "out_in"}};
    if (optimizer) meta["optimizer"] = "adamw";
    return meta;
  }
  std::map<std::string, std::string> meta{
      {"model", "moe-gpt"},
      {"exporter", std::string("salamander ") + SAL_VERSION},
      {"step", std::to_string(m.step)},
      {"layers", std::to_string(d.layers)},
      {"d_model", std::to_string(d.d)},
      {"heads", std::to_string(d.heads)},
      {"experts", std::to_string(d.experts)},
      {"top_k", std::to_string(d.top_k)},
      {"ffn", std::to_string(d.ffn())},
      {"seq_len", std::to_string(d.seq_len)},
      {"vocab", std::to_string(d.vocab)},
      {"tokens", tokens},
      {"layer_norm_eps", number(kernels::cpu::kLayerNormEps)},
      {"activation", "gelu_tanh"},
      {"lm_head", "embed.tokens"},
      {"matrix_layout", "in_out"},
      {"combine", "gate_probability"},
  };
  if (optimizer) {
    model::OptimConfig c;
    meta["optimizer"] = "adamw";
    meta["adamw_beta1"] = number(c.beta1);
    meta["adamw_beta2"] = number(c.beta2);
    meta["adamw_eps"] = number(c.eps);
  }
  return meta;
}

Result<ExportSummary> export_safetensors(const std::string& path, const std::string& out, bool optimizer) {
  auto dir = resolve_checkpoint(path);
  if (!dir) return dir.error();
  auto manifest = read_manifest(*dir);
  if (!manifest) return manifest.error();
  auto params = load_all(*dir);
  if (!params) return params.error().with_context(*dir + ": an incomplete or damaged checkpoint");
  auto tensors = model_tensors(*params, optimizer);
  auto bytes = encode_safetensors(tensors.tensors, model_metadata(*manifest, optimizer));
  if (!bytes) return bytes.error().with_context(*dir);
  SAL_TRY(write_file(out, *bytes));
  ExportSummary sum{*dir, manifest->step, tensors.tensors.size(), bytes->size(), ""};
  if (params->dims.llama()) {
    const auto parent = std::filesystem::path(out).parent_path();
    sum.config = (parent.empty() ? std::filesystem::path("config.json") : parent / "config.json").string();
    SAL_TRY(write_file(sum.config, hf_config_json(params->dims)));
  }
  return sum;
}

}  // namespace sal::ckpt

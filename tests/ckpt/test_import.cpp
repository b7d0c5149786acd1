// test_import.cpp — the import side of the Hugging Face layout (engine/ckpt/hf_*.h, import.h,
// safetensors reading): the layout moves every parameter exactly once and back; configs are read
// per model_type and what is not built is refused by key; a safetensors file that lies about itself
// is refused; an import refuses a missing, a misshapen and an unknown tensor by name, and carries
// the step and the moments of an export. (tests/ckpt/hf_import.py checks the imported model's
// logits against an independent forward pass.)
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "ckpt/export.h"
#include "ckpt/format.h"
#include "ckpt/hf_config.h"
#include "ckpt/hf_layout.h"
#include "ckpt/import.h"
#include "ckpt/safetensors.h"
#include "core/paths.h"

using namespace sal;
using namespace sal::ckpt;

namespace {

model::Dims llama_dims() {
  model::Dims d;
  d.family = ModelFamily::llama;
  d.layers = 2, d.d = 8, d.heads = 2, d.kv_dim = 4, d.experts = 3, d.top_k = 2, d.seq_len = 5, d.vocab = 11;
  d.expert_ffn = 6, d.shared_ffn = 6, d.tied_head = false;
  return d;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string import_dir(const std::string& tag) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/sal-import-" + tag + "-" +
                    std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A checkpoint of random weights and moments at `step`, exported (with moments) into dir/hf.
model::Params export_random(const std::string& dir, const model::Dims& d, uint64_t step) {
  auto p = model::Params::create(d, 3, model::Params::all_experts(d));
  std::mt19937 rng(4);
  std::normal_distribution<float> n(0, 1);
  for (model::Unit* u : p.units())
    for (auto* v : {&u->m, &u->v})
      for (float& x : *v) x = n(rng);
  const Slice bias = gate_layout(d).bias;  // a routing bias (if any) away from its initial 0
  for (model::Unit& g : p.gate)
    for (size_t i = bias.offset; i < bias.offset + bias.size; ++i) g.w[i] = n(rng);
  std::filesystem::create_directories(dir + "/ckpt");
  for (model::Unit* u : p.units()) REQUIRE(write_unit(dir + "/ckpt", *u, step).ok());
  REQUIRE(write_manifest(dir + "/ckpt", step, p.units().size(), d, "uint16").ok());
  std::filesystem::create_directories(dir + "/hf");
  auto done = export_safetensors(dir + "/ckpt", dir + "/hf/model.safetensors", true);
  REQUIRE(done.ok());
  return p;
}

// Rewrites dir/hf/model.safetensors with `edit` applied to its tensors (name -> values, shape).
void rewrite(const std::string& dir, const std::function<void(std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>&)>& edit) {
  auto f = SafetensorsFile::read(dir + "/hf/model.safetensors");
  REQUIRE(f.ok());
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> t;
  for (const auto& [name, st] : f->tensors()) t[name] = {st.shape, *f->floats(name)};
  edit(t);
  std::vector<NamedTensor> out;
  for (auto& [name, v] : t) out.push_back({name, v.first, v.second.data()});
  auto bytes = encode_safetensors(out, f->metadata());
  REQUIRE(bytes.ok());
  REQUIRE(write_file(dir + "/hf/model.safetensors", *bytes).ok());
}

}  // namespace

TEST_CASE("the HF layout places every parameter of every unit exactly once, and back") {
  for (int variant : {0, 1, 2}) {
    const HfNaming naming = variant == 0 ? HfNaming::mixtral : HfNaming::mlp;
    auto d = llama_dims();
    if (naming == HfNaming::mixtral) d.shared_ffn = 0;
    // DeepSeek-V3's routing bias in the gate, OLMoE's QK-norm, Qwen2-MoE's attention biases and gated
    // shared expert
    d.router_bias = d.qk_norm = d.attn_bias = d.shared_gate = variant == 2;
    CAPTURE(variant);
    std::map<UnitKind, std::vector<int>> hits;
    for (UnitKind k : {UnitKind::embedding, UnitKind::dense, UnitKind::gate, UnitKind::expert})
      hits[k].assign(unit_size(d, k), 0);
    std::set<std::string> names;
    for (const HfTensor& t : hf_tensors(d, naming)) {
      CHECK(names.insert(t.name).second);
      std::vector<float> marks(unit_size(d, t.unit.kind), 0.0f), out(t.elements());
      for (size_t i = 0; i < marks.size(); ++i) marks[i] = float(i);
      to_hf(t, marks.data(), out.data());
      if (t.unit.layer <= 0 && t.unit.expert <= 0)  // one unit of each kind: the first
        for (float v : out) ++hits[t.unit.kind][size_t(v)];
      std::vector<float> back(marks.size(), -1.0f);
      from_hf(t, out.data(), back.data());
      for (float v : out) CHECK(back[size_t(v)] == v);
    }
    for (auto& [kind, h] : hits) {
      CAPTURE(unit_kind_name(kind));
      CHECK(std::all_of(h.begin(), h.end(), [](int n) { return n == 1; }));
    }
  }
  auto d = llama_dims();
  auto t = hf_tensors(d, HfNaming::mlp);
  auto k = std::find_if(t.begin(), t.end(), [](const HfTensor& x) { return x.name == "model.layers.1.self_attn.k_proj.weight"; });
  REQUIRE(k != t.end());
  CHECK(k->shape() == std::vector<int64_t>{4, 8});  // [kv, d]: nn.Linear's [out, in]
  d.router_bias = true;
  t = hf_tensors(d, HfNaming::mlp);
  auto b = std::find_if(t.begin(), t.end(),
                        [](const HfTensor& x) { return x.name == "model.layers.1.mlp.gate.e_score_correction_bias"; });
  REQUIRE(b != t.end());
  CHECK(b->shape() == std::vector<int64_t>{3});
  CHECK(export_naming(d) == HfNaming::mlp);  // Mixtral's naming has no routing bias
  d.router_bias = false, d.qk_norm = true;
  t = hf_tensors(d, HfNaming::mlp);
  auto kn = std::find_if(t.begin(), t.end(), [](const HfTensor& x) { return x.name == "model.layers.0.self_attn.k_norm.weight"; });
  REQUIRE(kn != t.end());
  CHECK(kn->shape() == std::vector<int64_t>{4});  // over the keys: kv
  CHECK(export_naming(d) == HfNaming::mlp);       // nor QK-norm
}

TEST_CASE("configs: DeepSeek-V3's topk_method noaux_tc is a routing bias, and group-limited routing is refused by key") {
  const std::string base = R"("model_type": "salamander_moe_llama", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "vocab_size": 100, "scoring_func": "sigmoid")";
  auto greedy = parse_hf_config("{" + base + R"(, "topk_method": "greedy"})", "g.json");
  REQUIRE(greedy.ok());
  CHECK_FALSE(greedy->dims.router_bias);
  auto v3 = parse_hf_config("{" + base + R"(, "topk_method": "noaux_tc", "n_group": 1, "topk_group": 1})", "v3.json");
  REQUIRE(v3.ok());
  CHECK(v3->dims.router_bias);
  CHECK(v3->dims.bias_update == doctest::Approx(0.001));  // DeepSeek-V3's step where the config has none
  auto ours = parse_hf_config("{" + base + R"(, "topk_method": "noaux_tc", "bias_update_speed": 0.004})", "o.json");
  REQUIRE(ours.ok());
  CHECK(ours->dims.bias_update == doctest::Approx(0.004));
  for (auto [extra, key] : {std::pair{R"("topk_method": "group_limited_greedy")", "topk_method"},
                            std::pair{R"("topk_method": "noaux_tc", "n_group": 8, "topk_group": 4)", "n_group"},
                            std::pair{R"("topk_method": "noaux_tc", "routed_scaling_factor": 2.5)", "routed_scaling_factor"},
                            std::pair{R"("topk_method": "noaux_tc", "bias_update_speed": 0)", "bias_update_speed"}}) {
    auto r = parse_hf_config("{" + base + ", " + extra + "}", "bad.json");
    CAPTURE(extra);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("bad.json") != std::string::npos);
    CHECK(r.error().message().find(key) != std::string::npos);
  }
}

TEST_CASE("configs: per model_type, and what is not built is refused by key") {
  auto mixtral = parse_hf_config(R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 8, "num_experts_per_tok": 2,
      "intermediate_size": 96, "vocab_size": 1000, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6})", "c.json");
  REQUIRE(mixtral.ok());
  CHECK(mixtral->naming == HfNaming::mixtral);
  CHECK(mixtral->dims.kv() == 32);
  CHECK(mixtral->dims.ffn() == 96);
  CHECK(mixtral->dims.norm_topk);  // Mixtral renormalises its top-k
  CHECK(mixtral->dims.rope_theta == 1000000);
  CHECK(mixtral->dims.norm_eps == doctest::Approx(1e-6));
  auto qwen = parse_hf_config(R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "intermediate_size": 256, "shared_expert_intermediate_size": 128, "vocab_size": 1000})", "q.json");
  REQUIRE_MESSAGE(qwen.ok(), qwen.error().message());
  CHECK(qwen->naming == HfNaming::mlp);
  CHECK(qwen->dims.ffn() == 32);
  CHECK_FALSE(qwen->dims.norm_topk);
  CHECK_FALSE(qwen->dims.qk_norm);
  CHECK(qwen->dims.attn_bias);    // Qwen2's attention always has its q, k, v biases
  CHECK(qwen->dims.shared_gate);  // and one gated shared expert, 4 routed experts wide
  CHECK(qwen->dims.shared_ffn == 128);
  auto olmoe = parse_hf_config(R"({"model_type": "olmoe", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "num_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 32,
      "vocab_size": 1000, "router_aux_loss_coef": 0.01, "router_z_loss_coef": 0.001, "n_shared_experts": 0})", "o.json");
  REQUIRE_MESSAGE(olmoe.ok(), olmoe.error().message());
  CHECK(olmoe->dims.shared_ffn == 0);  // 0 shared experts written out: none
  CHECK(olmoe->dims.qk_norm);  // OLMoE's attention always normalises its queries and keys
  CHECK(olmoe->naming == HfNaming::mlp);
  const std::string base = R"("hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
      "num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 32, "vocab_size": 100)";
  for (auto [extra, key] : {std::pair{R"("model_type": "llama")", "model_type"},
                            std::pair{R"("model_type": "mixtral", "mlp_bias": true)", "mlp_bias"},
                            std::pair{R"("model_type": "qwen2_moe", "decoder_sparse_step": 2)", "decoder_sparse_step"},
                            std::pair{R"("model_type": "qwen2_moe", "mlp_only_layers": [0])", "mlp_only_layers"},
                            std::pair{R"("model_type": "mixtral", "head_dim": 32)", "head_dim"},
                            std::pair{R"("model_type": "mixtral", "num_key_value_heads": 3)", "num_key_value_heads"},
                            std::pair{R"("model_type": "mixtral", "rope_scaling": {"type": "yarn"})", "rope_scaling"},
                            std::pair{R"("model_type": "qwen2_moe", "shared_expert_intermediate_size": 48)",
                                      "shared_expert_intermediate_size"},  // not a whole number of experts' width
                            std::pair{R"("model_type": "mixtral", "rms_norm_eps": "small")", "rms_norm_eps"},
                            std::pair{R"("model_type": "mixtral", "use_qk_norm": true)", "use_qk_norm"}}) {
    auto r = parse_hf_config("{" + std::string(extra) + ", " + base + "}", "bad.json");
    CAPTURE(extra);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().find("bad.json") != std::string::npos);
    CHECK(r.error().message().find(key) != std::string::npos);
  }
  CHECK_FALSE(parse_hf_config(R"({"model_type": "mixtral"})", "x").ok());  // no sizes
}

TEST_CASE("a safetensors file that lies about itself is refused") {
  float v[4] = {1, 2, 3, 4};
  auto good = encode_safetensors({{"a", {2, 2}, v}}, {});
  REQUIRE(good.ok());
  CHECK(SafetensorsFile::parse(*good, "f").ok());
  CHECK_FALSE(SafetensorsFile::parse(good->substr(0, good->size() - 1), "f").ok());  // data cut short
  CHECK_FALSE(SafetensorsFile::parse(good->substr(0, 6), "f").ok());
  std::string lie = *good;
  lie.replace(lie.find("F32"), 3, "I64");
  auto r = SafetensorsFile::parse(lie, "f");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("I64") != std::string::npos);
  uint16_t bf[2] = {0x3f80, 0xc000};  // 1.0 and -2.0 in bfloat16
  std::string h = R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  std::string file(8, '\0');
  file[0] = char(h.size());
  file += h + std::string(reinterpret_cast<const char*>(bf), 4);
  auto b = SafetensorsFile::parse(file, "b");
  REQUIRE(b.ok());
  CHECK(*b->floats("b") == std::vector<float>{1.0f, -2.0f});
}

TEST_CASE("import: an export comes back with its step and moments, and missing, misshapen and unknown tensors are refused by name") {
  const std::string dir = import_dir("round");
  auto d = llama_dims();
  auto p = export_random(dir, d, 7);
  REQUIRE(path_exists(dir + "/hf/config.json"));
  auto done = import_hf(dir + "/hf", dir + "/back");
  REQUIRE(done.ok());
  CHECK(done->step == 7);
  CHECK(done->moments);
  auto back = load_all(dir + "/back");
  REQUIRE(back.ok());
  auto a = p.units(), b = back->units();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i]->id.name());
    CHECK(a[i]->w == b[i]->w);
    CHECK(a[i]->m == b[i]->m);
    CHECK(a[i]->v == b[i]->v);
  }
  CHECK(path_exists(dir + "/back/job.lua"));
  CHECK(read_text(dir + "/back/job.lua").find("bias_update") == std::string::npos);


  auto refused = [&](auto edit, const std::string& needle) {
    export_random(dir, d, 7);
    rewrite(dir, edit);
    auto r = import_hf(dir + "/hf", dir + "/bad");
    REQUIRE_FALSE(r.ok());
    CAPTURE(r.error().message());
    CHECK(r.error().message().find(needle) != std::string::npos);
  };
  using Map = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;
  refused([](Map& t) { t.erase("model.layers.1.mlp.experts.2.down_proj.weight"); },
          "model.layers.1.mlp.experts.2.down_proj.weight");
  refused([](Map& t) { t["model.norm.weight"] = {{9}, std::vector<float>(9, 1.0f)}; }, "model.norm.weight is [9]");
  refused([](Map& t) { t["model.layers.0.self_attn.q_norm.weight"] = {{4}, std::vector<float>(4, 1.0f)}; },
          "model.layers.0.self_attn.q_norm.weight is not a tensor");
  std::filesystem::remove_all(dir);
}

TEST_CASE("import: a routing bias (DeepSeek-V3's) comes back with its step, and the job file sets it") {
  const std::string biased = import_dir("bias");
  auto db = llama_dims();
  db.router_bias = true, db.bias_update = 0.005f, db.sigmoid_router = true, db.norm_topk = true;
  auto pb = export_random(biased, db, 3);
  auto hf = read_text(biased + "/hf/config.json");
  CHECK(hf.find("\"noaux_tc\"") != std::string::npos);
  auto done = import_hf(biased + "/hf", biased + "/back");
  REQUIRE_MESSAGE(done.ok(), done.error().message());
  auto bb = load_all(biased + "/back");
  REQUIRE(bb.ok());
  CHECK(bb->dims.router_bias);
  for (int l = 0; l < db.layers; ++l) CHECK(bb->gate[size_t(l)].w == pb.gate[size_t(l)].w);
  CHECK(read_text(biased + "/back/job.lua").find("bias_update = 0.005") != std::string::npos);
  std::filesystem::remove_all(biased);
}

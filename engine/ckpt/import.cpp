// import.cpp — see import.h.
#include "ckpt/import.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "ckpt/format.h"
#include "ckpt/safetensors.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sal::ckpt {
namespace {

// The files of a checkpoint directory and which holds each tensor.
struct Shards {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> where;
};

Result<std::vector<std::string>> shard_names(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  if (!path_exists(index)) {
    if (!path_exists(dir + "/model.safetensors"))
      return fail(dir, ": neither model.safetensors nor model.safetensors.index.json");
    return std::vector<std::string>{"model.safetensors"};
  }
  auto text = read_file(index, size_t(64) << 20);
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return fail(index, ": no weight_map object");
  std::set<std::string> names;
  for (auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) return fail(index, ": weight_map.", tensor, " is not a file name");
    const std::string f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
      return fail(index, ": weight_map.", tensor, ": '", f, "' is not a file of this directory");
    names.insert(f);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<Shards> read_shards(const std::string& dir) {
  auto names = shard_names(dir);
  if (!names) return names.error();
  Shards s;
  for (const auto& n : *names) {
    auto f = SafetensorsFile::read(dir + "/" + n);
    if (!f) return f.error();
    s.files.push_back(std::make_unique<SafetensorsFile>(std::move(*f)));
    for (const auto& [name, t] : s.files.back()->tensors())
      if (!s.where.emplace(name, s.files.back().get()).second) return fail(dir, ": ", name, " is in two files");
  }
  return s;
}

Unit empty_unit(const Dims& d, UnitId id) {
  Unit u;
  u.id = id;
  const size_t n = unit_size(d, id.kind);
  u.w.assign(n, 0.0f), u.g.assign(n, 0.0f), u.m.assign(n, 0.0f), u.v.assign(n, 0.0f);
  return u;
}

// Reads `name` (of HF shape t.shape()) into `into` through t's placement.
Status read_tensor(const Shards& s, const std::string& name, const HfTensor& t, std::vector<float>& into) {
  auto it = s.where.find(name);
  if (it == s.where.end()) return fail("no tensor ", name);
  const StoredTensor& st = it->second->tensors().at(name);
  if (st.shape != t.shape()) {
    std::string got, want;
    for (auto v : st.shape) got += (got.empty() ? "" : ", ") + std::to_string(v);
    for (auto v : t.shape()) want += (want.empty() ? "" : ", ") + std::to_string(v);
    return fail(it->second->label(), ": ", name, " is [", got, "], the config makes it [", want, "]");
  }
  auto values = it->second->floats(name);
  if (!values) return values.error();
  from_hf(t, values->data(), into.data());
  return {};
}

// Tensors of a HF checkpoint that carry no weights of the model (recomputed buffers).
bool ignorable(const std::string& name) {
  const std::string tail = "rotary_emb.inv_freq";
  return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

Result<Params> read_params(const Shards& s, const HfModel& m, bool& moments, size_t& read) {
  const Dims& d = m.dims;
  Params p;
  p.dims = d;
  p.embedding = empty_unit(d, {UnitKind::embedding, -1, -1});
  for (int l = 0; l < d.layers; ++l) {
    p.dense.push_back(empty_unit(d, {UnitKind::dense, l, -1}));
    p.gate.push_back(empty_unit(d, {UnitKind::gate, l, -1}));
    for (int e = 0; e < d.experts; ++e) p.experts.emplace(std::pair{l, e}, empty_unit(d, {UnitKind::expert, l, e}));
  }
  std::set<std::string> used;
  const auto tensors = hf_tensors(d, m.naming);
  moments = s.where.count("optim.exp_avg." + tensors.front().name) > 0;
  for (const HfTensor& t : tensors) {
    Unit& u = *p.unit(t.unit);  // every unit is there: made above
    SAL_TRY(read_tensor(s, t.name, t, u.w));
    used.insert(t.name);
    if (!moments) continue;
    for (auto [prefix, buf] : {std::pair{"optim.exp_avg.", &u.m}, std::pair{"optim.exp_avg_sq.", &u.v}}) {
      SAL_TRY(read_tensor(s, prefix + t.name, t, *buf));
      used.insert(prefix + t.name);
    }
  }
  for (const auto& [name, file] : s.where)
    if (!used.count(name) && !ignorable(name))
      return fail(file->label(), ": ", name, " is not a tensor of this ", family_name(d.family), " model (",
                  m.model_type, " naming)");
  read = used.size();
  return p;
}

std::string lua_bool(bool b) { return b ? "true" : "false"; }

// The shortest decimal that reads back as the same float (0.005f as "0.005", not 0.00499999989).
std::string short_float(float v) {
  char out[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(out, sizeof out, "%.*g", digits, double(v));
    if (std::strtof(out, nullptr) == v) break;
  }
  return out;
}

}  // namespace

std::string import_job_text(const Dims& d, const std::string& tokens) {
  std::string t = "-- Written by `salamander import`: the imported model's section. Set data to your token file (ids\n"
                  "-- of the model's tokenizer; docs/models.md), then: salamander run THIS.lua --resume DIR\n"
                  "return {\n  model = {\n    kind = \"moe-llama\",\n";
  t += "    layers = " + std::to_string(d.layers) + ", d_model = " + std::to_string(d.d) + ", heads = " +
       std::to_string(d.heads) + ", kv_heads = " + std::to_string(d.kv_heads()) + ",\n";
  t += "    experts = " + std::to_string(d.experts) + ", top_k = " + std::to_string(d.top_k) + ", expert_ffn = " +
       std::to_string(d.ffn()) + ", shared_experts = " + std::to_string(d.shared_ffn / d.ffn()) + ",\n";
  t += std::string("    router = \"") + (d.sigmoid_router ? "sigmoid" : "softmax") + "\", norm_topk = " +
       lua_bool(d.norm_topk) + ", tied_head = " + lua_bool(d.tied_head) + ",\n";
  t += "    rope_theta = " + std::to_string(d.rope_theta) + ", norm_eps = " + short_float(d.norm_eps) + ",\n";
  t += "    aux_loss_weight = " + short_float(d.aux_weight) + ", z_loss_weight = " + short_float(d.z_loss_weight) + ",\n";
  if (d.router_bias) t += "    bias_update = " + short_float(d.bias_update) + ",\n";
  if (d.qk_norm) t += "    qk_norm = true,\n";
  if (d.attn_bias) t += "    attn_bias = true,\n";
  if (d.shared_gate) t += "    shared_gate = true,\n";
  t += "    seq_len = " + std::to_string(std::min(d.seq_len, 2048)) + ", vocab = " + std::to_string(d.vocab) + ",\n  },\n";
  const std::string format = !tokens.empty() ? tokens : d.vocab > 65536 ? "uint32" : "uint16";
  t += "  data = { path = \"tokens." + format + "\", format = \"" + format + "\" },\n";
  t += "  train = { steps = 100, batch = 16, lr = 1e-4, warmup = 10 },\n}\n";
  return t;
}

Result<ImportSummary> import_hf(const std::string& dir, const std::string& out) {
  auto config = read_file(dir + "/config.json", size_t(16) << 20);
  if (!config) return fail(dir, ": no config.json (", config.error().message(), ")");
  auto model = parse_hf_config(*config, dir + "/config.json");
  if (!model) return model.error();
  auto shards = read_shards(dir);
  if (!shards) return shards.error();
  ImportSummary sum;
  sum.model = *model;
  auto params = read_params(*shards, *model, sum.moments, sum.tensors);
  if (!params) return params.error();
  std::string tokens;
  for (const auto& f : shards->files) {
    const auto& meta = f->metadata();
    if (auto it = meta.find("step"); it != meta.end())
      if (auto v = parse_uint(it->second)) sum.step = *v;
    if (auto it = meta.find("tokens"); it != meta.end()) tokens = it->second;
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return fail(out, ": ", ec.message());
  for (Unit* u : params->units()) SAL_TRY(write_unit(out, *u, sum.step));
  SAL_TRY(write_manifest(out, sum.step, params->units().size(), params->dims, tokens));
  sum.checkpoint = out;
  sum.job_file = out + "/job.lua";
  SAL_TRY(write_file(sum.job_file, import_job_text(params->dims, tokens)));
  sum.parameters = params->parameter_count();
  return sum;
}

}  // namespace sal::ckpt

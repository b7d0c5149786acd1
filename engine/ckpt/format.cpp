// format.cpp — see format.h.
#include "ckpt/format.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/digest.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sal::ckpt {
namespace {

// SALUNIT2 adds the digest trailer; SALUNIT1 files (written before it) are read without one.
constexpr char kMagic[8] = {'S', 'A', 'L', 'U', 'N', 'I', 'T', '2'};
constexpr char kMagicV1[8] = {'S', 'A', 'L', 'U', 'N', 'I', 'T', '1'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 4 + 8 + 8;
constexpr size_t kDigestBytes = 8;

// The weights', then the moments' digest, chained (core/digest.h).
uint64_t payload_digest(const float* w, const float* m, const float* v, size_t n) {
  return digest_floats(v, n, digest_floats(m, n, digest_floats(w, n)));
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(const std::string& in, size_t& at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

Status mark_complete(const Snapshot& s) {
  return write_file(s.dir + "/complete", "step " + std::to_string(s.step) + "\nunits " + std::to_string(s.units) + "\n");
}

Status remove_snapshot(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return fail("could not remove the old snapshot ", dir, ": ", ec.message());
  return {};
}

std::vector<std::string> remove_incomplete_snapshots(const std::string& root) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
    if (!e.is_directory() || std::filesystem::exists(e.path() / "complete")) continue;
    if (remove_snapshot(e.path().string())) removed.push_back(e.path().string());
  }
  return removed;
}

std::string unit_file(const std::string& dir, const UnitId& id) { return dir + "/" + id.name() + ".bin"; }

Status write_unit(const std::string& dir, const Unit& u, uint64_t step) {
  if (u.m.size() != u.w.size() || u.v.size() != u.w.size())
    return fail(u.id.name(), ": moments of ", u.m.size(), " and ", u.v.size(), " floats for ", u.w.size(), " values");
  return write_unit(dir, model::UnitView{u.id, u.w.data(), u.m.data(), u.v.data(), u.w.size()}, step);
}

Status write_unit(const std::string& dir, const model::UnitView& u, uint64_t step) {
  std::string head(kMagic, sizeof kMagic);
  put(head, uint32_t(u.id.kind));
  put(head, int32_t(u.id.layer));
  put(head, int32_t(u.id.expert));
  put(head, uint64_t(u.size));
  put(head, step);
  const size_t bytes = u.size * sizeof(float);
  std::vector<std::string_view> parts{head};
  for (const float* t : {u.w, u.m, u.v}) parts.emplace_back(reinterpret_cast<const char*>(t), bytes);
  std::string tail;
  put(tail, payload_digest(u.w, u.m, u.v, u.size));
  parts.emplace_back(tail);
  return write_file(unit_file(dir, u.id), parts);
}

Result<Unit> read_unit(const std::string& path, const Dims& dims, uint64_t* step) {
  auto data = read_file(path, size_t(8) << 30);
  if (!data) return data.error();
  if (data->size() < kHeaderBytes) return fail(path, ": not a Salamander unit file");
  const bool digested = std::memcmp(data->data(), kMagic, sizeof kMagic) == 0;
  if (!digested && std::memcmp(data->data(), kMagicV1, sizeof kMagicV1) != 0)
    return fail(path, ": not a Salamander unit file");
  size_t at = sizeof kMagic;
  Unit u;
  u.id.kind = UnitKind(get<uint32_t>(*data, at));
  u.id.layer = get<int32_t>(*data, at);
  u.id.expert = get<int32_t>(*data, at);
  uint64_t n = get<uint64_t>(*data, at);
  uint64_t written = get<uint64_t>(*data, at);
  if (step) *step = written;
  if (uint32_t(u.id.kind) > uint32_t(UnitKind::expert)) return fail(path, ": unknown unit kind");
  size_t want = unit_size(dims, u.id.kind);
  if (n != want) return fail(path, ": ", n, " parameters, but this model's ", u.id.name(), " has ", want);
  if (data->size() != kHeaderBytes + 3 * n * sizeof(float) + (digested ? kDigestBytes : 0))
    return fail(path, ": truncated");
  for (auto* v : {&u.w, &u.m, &u.v}) {
    v->resize(n);
    std::memcpy(v->data(), data->data() + at, n * sizeof(float));
    at += n * sizeof(float);
  }
  if (digested && get<uint64_t>(*data, at) != payload_digest(u.w.data(), u.m.data(), u.v.data(), n))
    return fail(path, ": damaged: its values do not match the digest written with them (bits changed on disk)");
  u.g.assign(n, 0.0f);
  return u;
}

namespace {

// The shape keys a manifest records, bound to a Dims.
std::vector<std::pair<std::string, int*>> manifest_dims(Dims& d) {
  return {{"layers", &d.layers}, {"d_model", &d.d},       {"heads", &d.heads},  {"experts", &d.experts},
          {"top_k", &d.top_k},   {"seq_len", &d.seq_len}, {"vocab", &d.vocab}};
}

// moe-llama's further keys (a moe-gpt manifest has none of them, as before the family existed).
std::vector<std::pair<std::string, int*>> llama_dims(Dims& d) {
  return {{"expert_ffn", &d.expert_ffn}, {"kv_dim", &d.kv_dim}, {"shared_ffn", &d.shared_ffn},
          {"rope_theta", &d.rope_theta}};
}
std::vector<std::pair<std::string, bool*>> llama_flags(Dims& d) {
  return {{"tied_head", &d.tied_head},
          {"sigmoid_router", &d.sigmoid_router},
          {"norm_topk", &d.norm_topk},
          {"router_bias", &d.router_bias},
          {"qk_norm", &d.qk_norm},
          {"attn_bias", &d.attn_bias},
          {"shared_gate", &d.shared_gate}};
}

// moe-llama's real-valued keys and the open interval (lo, hi) or, closed, [lo, hi] each lies in.
struct RealKey {
  const char* key;
  float* value;
  double lo, hi;
  bool closed;
};
std::vector<RealKey> llama_reals(Dims& d) {
  return {{"norm_eps", &d.norm_eps, 0, 1, false}, {"bias_update", &d.bias_update, 0, 1, true}};
}

// The token formats a manifest's tokens line may name (the job schema's data.format values).
bool known_tokens(const std::string& t) { return t == "bytes" || t == "uint16" || t == "uint32"; }

// A manifest line past the step and the shape: the family, a moe-llama key, or an unknown key.
Status read_model_key(Dims& d, const std::string& key, const std::string& value) {
  for (const RealKey& r : llama_reals(d)) {
    if (key != r.key) continue;
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    const bool inside = r.closed ? v >= r.lo && v <= r.hi : v > r.lo && v < r.hi;
    if (value.empty() || *end != '\0' || !inside)
      return fail(key, ": expected a number in ", r.closed ? "[" : "(", r.lo, ", ", r.hi, r.closed ? "]" : ")", ", got '",
                  value, "'");
    *r.value = float(v);
    return {};
  }
  if (key == "family") {
    auto f = parse_family(value);
    if (!f) return fail("family: expected moe-gpt or moe-llama, got '", value, "'");
    d.family = *f;
    return {};
  }
  for (auto [k, v] : llama_flags(d))
    if (k == key) {
      if (value != "0" && value != "1") return fail(key, ": expected 0 or 1, got '", value, "'");
      *v = value == "1";
      return {};
    }
  auto n = parse_uint(value);
  if (!n) return fail(key, ": ", n.error().message());
  auto fields = manifest_dims(d), more = llama_dims(d);
  fields.insert(fields.end(), more.begin(), more.end());
  auto f = std::find_if(fields.begin(), fields.end(), [&](const auto& kv) { return kv.first == key; });
  if (f == fields.end()) return fail("unknown key '", key, "'");
  *f->second = int(*n);
  return {};
}

}  // namespace

Status write_manifest(const std::string& dir, uint64_t step, size_t units, const Dims& d, const std::string& tokens) {
  std::string text = "step " + std::to_string(step) + "\nunits " + std::to_string(units) + "\n";
  Dims shape = d;
  for (auto [key, v] : manifest_dims(shape)) text += key + " " + std::to_string(*v) + "\n";
  if (shape.llama()) {
    text += std::string("family ") + family_name(shape.family) + "\n";
    for (auto [key, v] : llama_dims(shape)) text += key + " " + std::to_string(*v) + "\n";
    for (auto [key, v] : llama_flags(shape)) text += key + (*v ? " 1\n" : " 0\n");
    for (const RealKey& r : llama_reals(shape)) {
      char v[32];
      std::snprintf(v, sizeof v, "%.9g", double(*r.value));
      text += std::string(r.key) + " " + v + "\n";
    }
  }
  if (!tokens.empty()) text += "tokens " + tokens + "\n";
  return write_file(dir + "/manifest", text);
}

Result<Manifest> read_manifest(const std::string& dir) {
  auto text = read_file(dir + "/manifest", 4096);
  if (!text) return fail(dir, " has no manifest: not a complete checkpoint");
  Manifest m;
  bool have_step = false;
  for (auto& [n, line] : content_lines(*text)) {
    auto w = words(line);
    if (w.size() != 2) return fail(dir, "/manifest:", n, ": expected 'key value', got '", line, "'");
    if (w[0] == "tokens") {
      if (!known_tokens(w[1])) return fail(dir, "/manifest:", n, ": tokens: expected bytes, uint16 or uint32, got '", w[1], "'");
      m.tokens = w[1];
      continue;
    }
    if (w[0] == "step" || w[0] == "units") {
      auto v = parse_uint(w[1]);
      if (!v) return fail(dir, "/manifest:", n, ": ", w[0], ": ", v.error().message());
      if (w[0] == "units") m.units = size_t(*v);
      else m.step = *v, have_step = true;
    } else if (auto s = read_model_key(m.dims, w[0], w[1]); !s) {
      return s.error().with_context(dir + "/manifest:" + std::to_string(n));
    }
  }
  if (!have_step) return fail(dir, "/manifest: no step line");
  return m;
}

namespace {

// The newest complete checkpoint of a run directory: its final checkpoint, else the newest complete
// dense snapshot (snapshots/step-N with a manifest); "" if none.
std::string newest_checkpoint(const std::string& run_dir) {
  if (path_exists(run_dir + "/checkpoint/manifest")) return run_dir + "/checkpoint";
  std::string best;
  uint64_t best_step = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/snapshots", ec)) {
    if (!e.is_directory()) continue;
    auto m = read_manifest(e.path().string());
    if (m && (best.empty() || m->step > best_step)) best = e.path().string(), best_step = m->step;
  }
  return best;
}

}  // namespace

Result<std::string> resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return fail(path, ": no such directory");
  if (path_exists(path + "/manifest")) return path;
  if (auto newest = newest_checkpoint(path); !newest.empty()) return newest;
  return fail(path, " has no manifest: not a complete checkpoint, nor a run directory with one (",
              "RUN/checkpoint or a complete RUN/snapshots/step-N)");
}

Result<Params> load_all(const std::string& dir) {
  auto manifest = read_manifest(dir);
  if (!manifest) return manifest.error();
  const Dims& dims = manifest->dims;
  Params p;
  p.dims = dims;
  auto load = [&](UnitId id) -> Result<Unit> {
    auto u = read_unit(unit_file(dir, id), dims);
    if (!u) return u.error();
    if (u->id != id) return fail(unit_file(dir, id), " holds ", u->id.name());
    return u;
  };
  auto emb = load({UnitKind::embedding, -1, -1});
  if (!emb) return emb.error();
  p.embedding = std::move(*emb);
  for (int l = 0; l < dims.layers; ++l) {
    auto dense = load({UnitKind::dense, l, -1});
    auto gate = load({UnitKind::gate, l, -1});
    if (!dense) return dense.error();
    if (!gate) return gate.error();
    p.dense.push_back(std::move(*dense));
    p.gate.push_back(std::move(*gate));
    for (int e = 0; e < dims.experts; ++e) {
      auto ex = load({UnitKind::expert, l, e});
      if (!ex) return ex.error();
      p.experts.emplace(std::pair{l, e}, std::move(*ex));
    }
  }
  return p;
}

}  // namespace sal::ckpt

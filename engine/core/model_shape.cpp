// model_shape.cpp — see model_shape.h.
#include "core/model_shape.h"

#include <utility>

namespace sal {
namespace {

// Carves consecutive slices out of a unit's flat buffer.
struct Carver {
  size_t next = 0;
  Slice take(size_t n) {
    Slice s{next, n};
    next += n;
    return s;
  }
};

}  // namespace

const char* unit_kind_name(UnitKind k) {
  switch (k) {
    case UnitKind::embedding: return "embedding";
    case UnitKind::dense: return "dense";
    case UnitKind::gate: return "gate";
    case UnitKind::expert: return "expert";
  }
  return "?";
}

const char* family_name(ModelFamily f) { return f == ModelFamily::llama ? "moe-llama" : "moe-gpt"; }

std::optional<ModelFamily> parse_family(const std::string& name) {
  if (name == "moe-gpt") return ModelFamily::gpt;
  if (name == "moe-llama") return ModelFamily::llama;
  return std::nullopt;
}

std::string UnitId::name() const {
  switch (kind) {
    case UnitKind::embedding: return "embedding";
    case UnitKind::dense: return "layer" + std::to_string(layer) + ".dense";
    case UnitKind::gate: return "layer" + std::to_string(layer) + ".gate";
    case UnitKind::expert: return "layer" + std::to_string(layer) + ".expert" + std::to_string(expert);
  }
  return "?";
}

namespace {

// The decimal number at the front of `s` (no sign, no leading zero but "0"), and what follows it.
std::optional<std::pair<int, std::string>> leading_number(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && n < 9 && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || (n > 1 && s[0] == '0')) return std::nullopt;
  return std::pair{std::stoi(s.substr(0, n)), s.substr(n)};
}

}  // namespace

std::optional<UnitId> parse_unit_name(const std::string& name) {
  if (name == "embedding") return UnitId{UnitKind::embedding, -1, -1};
  if (name.rfind("layer", 0) != 0) return std::nullopt;
  auto layer = leading_number(name.substr(5));
  if (!layer) return std::nullopt;
  const std::string& rest = layer->second;
  if (rest == ".dense") return UnitId{UnitKind::dense, layer->first, -1};
  if (rest == ".gate") return UnitId{UnitKind::gate, layer->first, -1};
  if (rest.rfind(".expert", 0) != 0) return std::nullopt;
  auto expert = leading_number(rest.substr(7));
  if (!expert || !expert->second.empty()) return std::nullopt;
  return UnitId{UnitKind::expert, layer->first, expert->first};
}

EmbeddingLayout embedding_layout(const ModelShape& s) {
  Carver c;
  size_t D = size_t(s.d), V = size_t(s.vocab);
  EmbeddingLayout l;
  l.tok = c.take(V * D);
  l.pos = c.take(s.llama() ? 0 : size_t(s.seq_len) * D);
  l.lnf_g = c.take(D);
  l.lnf_b = c.take(s.llama() ? 0 : D);
  l.head = c.take(s.llama() && !s.tied_head ? D * V : 0);
  l.total = c.next;
  return l;
}

DenseLayout dense_layout(const ModelShape& s) {
  Carver c;
  size_t D = size_t(s.d), KV = size_t(s.kv()), S = size_t(s.llama() ? s.shared_ffn : 0);
  size_t bias = s.llama() ? 0 : 1;  // moe-llama has no biases and no LayerNorm shifts
  DenseLayout l;
  l.ln1_g = c.take(D);
  l.ln1_b = c.take(bias * D);
  l.w_qkv = c.take(D * (D + 2 * KV));
  l.b_qkv = c.take((s.llama() ? (s.attn_bias ? 1 : 0) : 1) * (D + 2 * KV));
  l.w_o = c.take(D * D);
  l.b_o = c.take(bias * D);
  l.ln2_g = c.take(D);
  l.ln2_b = c.take(bias * D);
  l.sh_w13 = c.take(D * 2 * S);
  l.sh_w2 = c.take(S * D);
  const size_t qk = s.llama() && s.qk_norm ? 1 : 0;
  l.q_norm = c.take(qk * D);
  l.k_norm = c.take(qk * KV);
  l.sh_gate = c.take(s.llama() && s.shared_gate && S > 0 ? D : 0);
  l.total = c.next;
  return l;
}

GateLayout gate_layout(const ModelShape& s) {
  Carver c;
  GateLayout l{c.take(size_t(s.d) * size_t(s.experts))};
  l.bias = c.take(s.llama() && s.router_bias ? size_t(s.experts) : 0);
  l.total = c.next;
  return l;
}

ExpertLayout expert_layout(const ModelShape& s) {
  Carver c;
  size_t D = size_t(s.d), F = size_t(s.ffn());
  ExpertLayout l;
  if (s.llama()) {
    l.w1 = c.take(D * 2 * F);
    l.b1 = c.take(0);
    l.w2 = c.take(F * D);
    l.b2 = c.take(0);
  } else {
    l.w1 = c.take(D * F);
    l.b1 = c.take(F);
    l.w2 = c.take(F * D);
    l.b2 = c.take(D);
  }
  l.total = c.next;
  return l;
}

size_t unit_size(const ModelShape& s, UnitKind k) {
  switch (k) {
    case UnitKind::embedding: return embedding_layout(s).total;
    case UnitKind::dense: return dense_layout(s).total;
    case UnitKind::gate: return gate_layout(s).total;
    case UnitKind::expert: return expert_layout(s).total;
  }
  return 0;
}

std::vector<UnitId> model_units(const ModelShape& s) {
  std::vector<UnitId> out{{UnitKind::embedding, -1, -1}};
  out.reserve(model_unit_count(s));
  for (int l = 0; l < s.layers; ++l) {
    out.push_back({UnitKind::dense, l, -1});
    out.push_back({UnitKind::gate, l, -1});
    for (int e = 0; e < s.experts; ++e) out.push_back({UnitKind::expert, l, e});
  }
  return out;
}

size_t model_unit_count(const ModelShape& s) {
  return 1 + size_t(s.layers) * (2 + size_t(s.experts));
}

long unit_index(const ModelShape& s, const UnitId& id) {
  const long per_layer = 2 + long(s.experts);
  switch (id.kind) {
    case UnitKind::embedding: return 0;
    case UnitKind::dense:
    case UnitKind::gate:
      if (id.layer < 0 || id.layer >= s.layers) return -1;
      return 1 + id.layer * per_layer + (id.kind == UnitKind::gate ? 1 : 0);
    case UnitKind::expert:
      if (id.layer < 0 || id.layer >= s.layers || id.expert < 0 || id.expert >= s.experts) return -1;
      return 1 + id.layer * per_layer + 2 + id.expert;
  }
  return -1;
}

}  // namespace sal

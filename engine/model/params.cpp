// params.cpp — see params.h.
#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace sal::model {
namespace {

constexpr float kInitStd = 0.02f;

// SplitMix64: a small, fast, well-mixed generator; the same stream on every platform.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Box–Muller: one normal per call (the pair's second value is discarded for simplicity).
  double normal() {
    double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

uint64_t unit_seed(uint64_t seed, const UnitId& id) {
  uint64_t h = seed * 0x9e3779b97f4a7c15ull;
  for (uint64_t v : {uint64_t(id.kind) + 1, uint64_t(id.layer + 2), uint64_t(id.expert + 2)})
    h = (h ^ v) * 0x100000001b3ull + 0x51ed270b27ull;
  return h;
}

void fill_normal(SplitMix& r, float* x, size_t n, float std) {
  for (size_t i = 0; i < n; ++i) x[i] = float(r.normal() * std);
}

void fill(float* x, size_t n, float v) {
  for (size_t i = 0; i < n; ++i) x[i] = v;
}

}  // namespace

void Unit::zero_grad() { std::fill(g.begin(), g.end(), 0.0f); }

Unit blank_unit(const Dims& d, UnitId id) {
  Unit u;
  u.id = id;
  size_t n = unit_size(d, id.kind);
  u.w.assign(n, 0.0f);
  u.g.assign(n, 0.0f);
  u.m.assign(n, 0.0f);
  u.v.assign(n, 0.0f);
  return u;
}

Unit make_unit(const Dims& d, UnitId id, uint64_t seed) {
  Unit u = blank_unit(d, id);
  SplitMix r{unit_seed(seed, id)};
  float proj_std = kInitStd / std::sqrt(2.0f * float(d.layers));
  switch (id.kind) {
    case UnitKind::embedding: {
      auto l = embedding_layout(d);
      fill_normal(r, u.at(l.tok), l.tok.size, kInitStd);
      fill_normal(r, u.at(l.pos), l.pos.size, kInitStd);
      fill(u.at(l.lnf_g), l.lnf_g.size, 1.0f);
      fill_normal(r, u.at(l.head), l.head.size, kInitStd);  // moe-llama untied only
      break;
    }
    case UnitKind::dense: {
      auto l = dense_layout(d);
      fill(u.at(l.ln1_g), l.ln1_g.size, 1.0f);
      fill(u.at(l.ln2_g), l.ln2_g.size, 1.0f);
      fill_normal(r, u.at(l.w_qkv), l.w_qkv.size, kInitStd);
      fill_normal(r, u.at(l.w_o), l.w_o.size, proj_std);
      fill_normal(r, u.at(l.sh_w13), l.sh_w13.size, kInitStd);  // moe-llama's shared experts
      fill_normal(r, u.at(l.sh_w2), l.sh_w2.size, proj_std);
      fill(u.at(l.q_norm), l.q_norm.size, 1.0f);  // moe-llama's QK-norm
      fill(u.at(l.k_norm), l.k_norm.size, 1.0f);
      fill_normal(r, u.at(l.sh_gate), l.sh_gate.size, kInitStd);  // moe-llama's shared-expert gate
      break;
    }
    case UnitKind::gate:
      fill_normal(r, u.at(gate_layout(d).w), gate_layout(d).w.size, kInitStd);
      break;
    case UnitKind::expert: {
      auto l = expert_layout(d);
      fill_normal(r, u.at(l.w1), l.w1.size, kInitStd);
      fill_normal(r, u.at(l.w2), l.w2.size, proj_std);
      break;
    }
  }
  return u;
}

namespace {

Params built(const Dims& d, const std::vector<std::pair<int, int>>& held_experts,
             const std::function<Unit(UnitId)>& unit) {
  Params p;
  p.dims = d;
  p.embedding = unit({UnitKind::embedding, -1, -1});
  for (int l = 0; l < d.layers; ++l) {
    p.dense.push_back(unit({UnitKind::dense, l, -1}));
    p.gate.push_back(unit({UnitKind::gate, l, -1}));
  }
  for (auto [l, e] : held_experts)
    if (!p.experts.count({l, e})) p.experts.emplace(std::pair{l, e}, unit({UnitKind::expert, l, e}));
  return p;
}

}  // namespace

Params Params::create(const Dims& d, uint64_t seed, const std::vector<std::pair<int, int>>& held_experts) {
  return built(d, held_experts, [&](UnitId id) { return make_unit(d, id, seed); });
}

Params Params::shaped(const Dims& d, const std::vector<std::pair<int, int>>& held_experts) {
  return built(d, held_experts, [&](UnitId id) { return blank_unit(d, id); });
}

std::vector<std::pair<int, int>> Params::all_experts(const Dims& d) {
  std::vector<std::pair<int, int>> out;
  for (int l = 0; l < d.layers; ++l)
    for (int e = 0; e < d.experts; ++e) out.emplace_back(l, e);
  return out;
}

Unit* Params::expert(int layer, int e) {
  auto it = experts.find({layer, e});
  return it == experts.end() ? nullptr : &it->second;
}

Unit* Params::unit(const UnitId& id) { return const_cast<Unit*>(std::as_const(*this).unit(id)); }

const Unit* Params::unit(const UnitId& id) const {
  const bool layer = id.layer >= 0 && size_t(id.layer) < dense.size();
  switch (id.kind) {
    case UnitKind::embedding: return &embedding;
    case UnitKind::dense: return layer ? &dense[size_t(id.layer)] : nullptr;
    case UnitKind::gate: return layer ? &gate[size_t(id.layer)] : nullptr;
    case UnitKind::expert: {
      auto it = experts.find({id.layer, id.expert});
      return it == experts.end() ? nullptr : &it->second;
    }
  }
  return nullptr;
}

std::vector<Unit*> Params::non_expert_units() {
  std::vector<Unit*> out{&embedding};
  for (size_t l = 0; l < dense.size(); ++l) {
    out.push_back(&dense[l]);
    out.push_back(&gate[l]);
  }
  return out;
}

std::vector<Unit*> Params::units() {
  std::vector<Unit*> out = non_expert_units();
  for (auto& [key, u] : experts) out.push_back(&u);
  return out;
}

void Params::zero_grads() {
  for (Unit* u : units()) u->zero_grad();
}

size_t Params::parameter_count() const {
  size_t n = embedding.w.size();
  for (const auto& u : dense) n += u.w.size();
  for (const auto& u : gate) n += u.w.size();
  for (const auto& [k, u] : experts) n += u.w.size();
  return n;
}

UnitViews views_of(std::vector<Unit> units) {
  auto held = std::make_shared<std::vector<Unit>>(std::move(units));
  UnitViews out;
  for (const Unit& u : *held) out.units.push_back(UnitView{u.id, u.w.data(), u.m.data(), u.v.data(), u.w.size()});
  out.keep = std::move(held);
  return out;
}

std::vector<Unit> copy_units(const UnitViews& views) {
  std::vector<Unit> out;
  out.reserve(views.units.size());
  for (const UnitView& v : views.units) {
    Unit u;
    u.id = v.id;
    u.w.assign(v.w, v.w + v.size);
    u.m.assign(v.m, v.m + v.size);
    u.v.assign(v.v, v.v + v.size);
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace sal::model

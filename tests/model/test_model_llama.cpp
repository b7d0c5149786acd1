// test_model_llama.cpp — the moe-llama model in one process: every unit's gradient against finite
// differences of the whole loss (cross-entropy, balancing and z-loss) in two configurations that
// between them cover every option (softmax and sigmoid routers, renormalised top-k or not,
// grouped-query and multi-query attention, attention biases, QK-norm, shared experts gated or not,
// fine-grained experts, tied and untied heads), and with a routing bias; a tiny model learning a
// pattern; causality and rotary positions (each position's logits are its prefix's); frozen units
// passing gradients through; the job file's keys reaching Dims.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "job/config.h"
#include "model/local_exchange.h"
#include "model/model.h"
#include "model/model_checks.h"
#include "model/optimizer.h"

using namespace sal;
using namespace sal::model;

namespace {

// Softmax router, plain top-k weights, 4 query heads over 2 key/value heads with QK-norm, one
// gated shared expert (Qwen2-MoE's), an untied head, a z-loss.
Dims grouped() {
  Dims d;
  d.family = ModelFamily::llama;
  d.layers = 2, d.d = 16, d.heads = 4, d.kv_dim = 8, d.experts = 4, d.top_k = 2, d.seq_len = 6, d.vocab = 13;
  d.expert_ffn = 12, d.shared_ffn = 12, d.tied_head = false, d.qk_norm = true, d.shared_gate = true;
  d.aux_weight = 0.05f, d.z_loss_weight = 0.01f;
  return d;
}

// Sigmoid router, renormalised top-3 of 6 fine-grained experts, one key/value head with attention
// biases (Qwen2's), a tied head.
Dims fine() {
  Dims d;
  d.family = ModelFamily::llama;
  d.layers = 1, d.d = 8, d.heads = 2, d.kv_dim = 4, d.experts = 6, d.top_k = 3, d.seq_len = 5, d.vocab = 11;
  d.expert_ffn = 6, d.sigmoid_router = true, d.norm_topk = true, d.aux_weight = 0.05f, d.z_loss_weight = 0.02f;
  d.attn_bias = true;
  d.rope_theta = 500;
  return d;
}

using test::pattern_corpus;
double loss(Params& p, const Batch& b, StepStats* stats = nullptr) { return test::whole_loss(p, b, stats); }

void check_gradients(const Dims& d) {
  Params p = Params::create(d, 7, Params::all_experts(d));
  // queries and keys 20x their initial scale, so the attention pattern (and the rotary positions in
  // it) is far from uniform and its gradients are large enough to check
  for (Unit& u : p.dense)
    for (size_t i = 0; i < size_t(d.d) * (d.d + 2 * d.kv()); ++i)
      if (i % size_t(d.d + 2 * d.kv()) < size_t(d.d + d.kv())) u.at(dense_layout(d).w_qkv)[i] *= 20.0f;
  // the shared experts 10x and their gate 50x, so the input gradient through the gate is well above
  // the FD noise (the norm gains before it, checked below, see it)
  for (Unit& u : p.dense)
    for (auto [s, by] : {std::pair{dense_layout(d).sh_w13, 10.0f}, {dense_layout(d).sh_w2, 10.0f}, {dense_layout(d).sh_gate, 50.0f}})
      for (size_t i = 0; i < s.size; ++i) u.at(s)[i] *= by;
  // a routing bias large enough to choose other experts than the scores alone would
  if (d.router_bias)
    for (Unit& g : p.gate)
      for (int e = 0; e < d.experts; ++e) g.at(gate_layout(d).bias)[e] = 0.05f * float((e * 5 + g.id.layer) % 3 - 1);
  Corpus c = pattern_corpus(d.vocab, 200);
  Batch b = make_batch(c, 3, 0, 0, 3, d.seq_len);
  StepStats base;
  loss(p, b, &base);
  std::vector<std::vector<float>> grads;
  for (Unit* u : p.units()) grads.push_back(u->g);
  std::mt19937 rng(1);
  int checked = 0, skipped = 0;
  auto units = p.units();
  for (size_t ui = 0; ui < units.size(); ++ui) {
    Unit* u = units[ui];
    CAPTURE(u->id.name());
    // 8 parameters anywhere, and 3 of each small tensor (QK-norm gains, attention biases, the
    // shared-expert gate, the norm before the experts) that 8 picks would rarely hit
    std::vector<size_t> at;
    for (int trial = 0; trial < 8; ++trial) at.push_back(rng() % u->w.size());
    if (u->id.kind == UnitKind::dense)
      for (Slice s : {dense_layout(d).q_norm, dense_layout(d).k_norm, dense_layout(d).b_qkv, dense_layout(d).sh_gate,
                      dense_layout(d).ln2_g})
        for (int trial = 0; trial < 3 && s.size > 0; ++trial) at.push_back(s.offset + rng() % s.size);
    for (size_t i : at) {
      const float orig = u->w[i], eps = 2e-3f;
      StepStats sp, sm;
      u->w[i] = orig + eps;
      double lp = loss(p, b, &sp);
      u->w[i] = orig - eps;
      double lm = loss(p, b, &sm);
      u->w[i] = orig;
      if (sp.expert_counts != base.expert_counts || sm.expert_counts != base.expert_counts) {
        ++skipped;  // the routing flipped: the loss is not smooth here
        continue;
      }
      double fd = (lp - lm) / (2.0 * eps), an = grads[ui][i];
      CAPTURE(i);
      CAPTURE(fd);
      CAPTURE(an);
      // float FD's noise is ~5e-4 here (a loss of ~50, steps of 2e-3): an absolute floor well above it
      // and well below the attention weights' gradients, which are small at initialisation
      CHECK(std::fabs(fd - an) <= 2e-3 + 2e-2 * std::fabs(fd));
      ++checked;
    }
  }
  CHECK(checked >= int(units.size()) * 5);
  MESSAGE("checked " << checked << " parameters, skipped " << skipped << " where top-k flipped");
}

}  // namespace

TEST_CASE("moe-llama: every unit's gradient matches finite differences (softmax router, grouped-query with QK-norm, shared experts, untied head)") {
  check_gradients(grouped());
}

TEST_CASE("moe-llama: every unit's gradient matches finite differences (sigmoid router, renormalised top-k, one kv head, tied head)") {
  check_gradients(fine());
}

TEST_CASE("moe-llama: every unit's gradient matches finite differences (sigmoid router with DeepSeek-V3's routing bias)") {
  Dims d = fine();
  d.router_bias = true, d.bias_update = 0.01f, d.aux_weight = 0;
  check_gradients(d);
}

TEST_CASE("moe-llama: the units' layouts hold what the family has and nothing else") {
  Dims d = grouped();
  auto el = embedding_layout(d);
  CHECK(el.pos.size == 0);
  CHECK(el.lnf_b.size == 0);
  CHECK(el.head.size == size_t(d.d) * d.vocab);
  auto dl = dense_layout(d);
  CHECK(dl.w_qkv.size == size_t(d.d) * (d.d + 2 * 8));
  CHECK(dl.b_qkv.size + dl.b_o.size + dl.ln1_b.size + dl.ln2_b.size == 0);  // (no attention biases here)
  CHECK(dl.sh_w13.size == size_t(d.d) * 2 * 12);
  CHECK(dl.q_norm.size == size_t(d.d));
  CHECK(dl.k_norm.size == 8);
  CHECK(dl.sh_gate.size == size_t(d.d));
  CHECK(dl.total == 2 * size_t(d.d) + dl.w_qkv.size + size_t(d.d) * d.d + dl.sh_w13.size + 12 * size_t(d.d) +
                        size_t(d.d) + 8 + size_t(d.d));
  CHECK(dense_layout(fine()).q_norm.size == 0);  // off: no gains
  CHECK(dense_layout(fine()).b_qkv.size == size_t(fine().d + 2 * fine().kv()));
  CHECK(dense_layout(fine()).sh_gate.size == 0);  // no shared experts to gate
  auto xl = expert_layout(d);
  CHECK(xl.w1.size == size_t(d.d) * 2 * 12);
  CHECK(xl.total == 3 * size_t(d.d) * 12);
  Dims gpt;  // moe-gpt's layouts are unchanged: no head, no shared experts
  CHECK(embedding_layout(gpt).head.size == 0);
  CHECK(dense_layout(gpt).sh_w13.size == 0);
  CHECK(dense_layout(gpt).q_norm.size == 0);
  CHECK(expert_layout(gpt).total == size_t(gpt.d) * 4 * gpt.d * 2 + 4 * size_t(gpt.d) + size_t(gpt.d));
}

TEST_CASE("moe-llama: a tiny model learns a pattern") {
  for (Dims d : {grouped(), fine()}) {
    d.d = 16, d.kv_dim = 8;
    Params p = Params::create(d, 1, Params::all_experts(d));
    auto [first, last] = test::train_on_pattern(p);
    MESSAGE("loss " << first << " -> " << last);
    CHECK(first > 2.0);  // about ln(vocab) at the start
    CHECK(last < 0.5 * first);
  }
}

TEST_CASE("moe-llama: each position's logits are those of its prefix (causal, positions from the sequence's start)") {
  Dims d = grouped();
  Params p = Params::create(d, 3, Params::all_experts(d));
  LocalExchange ex(p);
  auto m = make_model(p);
  std::vector<int32_t> ids = {1, 5, 2, 9, 4, 7, 3, 0, 12, 6, 8, 11};  // two sequences of 6
  auto all = m->logits(ids, 2, 6, ex);
  REQUIRE(all.ok());
  for (int s = 0; s < 2; ++s)
    for (int t = 1; t <= 6; ++t) {
      std::vector<int32_t> prefix(ids.begin() + s * 6, ids.begin() + s * 6 + t);
      auto next = m->next_logits(prefix, ex);
      REQUIRE(next.ok());
      for (int v = 0; v < d.vocab; ++v)
        CHECK((*next)[size_t(v)] == doctest::Approx((*all)[(size_t(s) * 6 + size_t(t) - 1) * d.vocab + size_t(v)]).epsilon(1e-4));
    }
  CHECK(!m->logits({1, 2, 13}, 1, 3, ex).ok());  // outside the vocabulary
  CHECK(!m->logits(std::vector<int32_t>(7, 1), 1, 7, ex).ok());  // longer than seq_len
}

TEST_CASE("moe-llama: a frozen unit passes gradients through and computes no weight gradient") {
  Dims d = grouped();
  Corpus c = pattern_corpus(d.vocab, 200);
  Batch b = make_batch(c, 3, 0, 0, 3, d.seq_len);
  Params active = Params::create(d, 7, Params::all_experts(d)), part = active;
  loss(active, b);
  for (Unit* u : part.units())
    u->frozen = u->id.kind == UnitKind::embedding || (u->id.kind == UnitKind::dense && u->id.layer == 1) ||
                (u->id.kind == UnitKind::gate && u->id.layer == 0) || (u->id.kind == UnitKind::expert && u->id.expert == 1);
  loss(part, b);
  auto pu = part.units(), au = active.units();
  int frozen = 0;
  for (size_t i = 0; i < pu.size(); ++i) {
    CAPTURE(pu[i]->id.name());
    if (pu[i]->frozen) {
      ++frozen;
      CHECK(std::all_of(pu[i]->g.begin(), pu[i]->g.end(), [](float x) { return x == 0.0f; }));
    } else {
      CHECK(pu[i]->g == au[i]->g);  // the input gradients passed on are exactly the active run's
    }
  }
  CHECK(frozen == 1 + 1 + 1 + 2);
}

TEST_CASE("moe-llama: the job file's keys reach the model's shape and options") {
  job::ModelConfig m;
  m.kind = "moe-llama", m.d_model = 64, m.heads = 8, m.kv_heads = 2, m.shared_experts = 2, m.expert_ffn = 32;
  m.tied_head = false, m.router = "sigmoid", m.norm_topk = true, m.z_loss_weight = 0.001, m.rope_theta = 1000000;
  m.qk_norm = true, m.attn_bias = true, m.shared_gate = true;
  Dims d = job::model_dims(m);
  CHECK(d.llama());
  CHECK(d.kv() == 16);
  CHECK(d.kv_heads() == 2);
  CHECK(d.shared_ffn == 64);
  CHECK(d.ffn() == 32);
  CHECK_FALSE(d.tied_head);
  CHECK(d.sigmoid_router);
  CHECK(d.norm_topk);
  CHECK(d.rope_theta == 1000000);
  CHECK(d.qk_norm);
  CHECK(d.attn_bias);
  CHECK(d.shared_gate);
  CHECK(dense_layout(d).sh_gate.size == 64);
  job::ModelConfig g;  // moe-gpt keeps its shape
  Dims dg = job::model_dims(g);
  CHECK_FALSE(dg.llama());
  CHECK(dg.kv() == dg.d);
  CHECK(dg.ffn() == 4 * dg.d);
}

// test_router_bias.cpp — DeepSeek-V3's auxiliary-loss-free balancing in moe-llama
// (model/router_bias.h): the bias chooses a token's experts but does not weigh them; the balancing
// step's rule (toward the mean load, frozen gates untouched, loads of the wrong shape refused);
// AdamW leaves the bias as it is; the job file's model.bias_update reaches the shape; and a tiny
// model trained without a balancing loss ends with its experts' loads more even with the bias than
// without it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "job/config.h"
#include "model/model_checks.h"
#include "model/router_bias.h"

using namespace sal;
using namespace sal::model;

namespace {

// DeepSeek-V3's router on a small model: sigmoid scores, renormalised top-2 of 8, no balancing loss.
Dims deepseek(bool bias) {
  Dims d;
  d.family = ModelFamily::llama;
  d.layers = 2, d.d = 16, d.heads = 2, d.kv_dim = 8, d.experts = 8, d.top_k = 2, d.seq_len = 8, d.vocab = 13;
  d.expert_ffn = 8, d.sigmoid_router = true, d.norm_topk = true, d.aux_weight = 0;
  d.router_bias = bias, d.bias_update = bias ? 0.01f : 0.0f;
  return d;
}

float* bias_of(Params& p, int layer) { return p.gate[size_t(layer)].at(gate_layout(p.dims).bias); }

// The largest expert load over the mean, per layer, from a step's global assignment counts.
double imbalance(const StepStats& s) {
  double worst = 0;
  for (const auto& layer : s.expert_counts) {
    double sum = 0, most = 0;
    for (uint32_t c : layer) sum += c, most = std::max(most, double(c));
    worst = std::max(worst, most / (sum / double(layer.size())));
  }
  return worst;
}

}  // namespace

TEST_CASE("router bias: the top k of the biased scores, weighed by the scores without the bias") {
  const float scores[] = {0.9f, 0.5f, 0.1f, 0.2f, 0.3f, 0.4f};
  const float bias[] = {0.0f, 0.0f, 1.0f};
  int32_t idx[4];
  float chosen[4];
  biased_topk(scores, bias, 2, 3, 2, idx, chosen);
  CHECK(idx[0] == 2);
  CHECK(idx[1] == 0);
  CHECK(chosen[0] == 0.1f);
  CHECK(chosen[1] == 0.9f);
  CHECK(idx[2] == 2);
  CHECK(idx[3] == 1);
  CHECK(chosen[2] == 0.4f);
  CHECK(chosen[3] == 0.3f);
  biased_topk(scores, nullptr, 2, 3, 2, idx, chosen);  // no bias: the plain top k
  CHECK(idx[0] == 0);
  CHECK(idx[1] == 1);
}

TEST_CASE("router bias: it decides where tokens go and nothing else") {
  Dims d = deepseek(true);
  Corpus c = test::pattern_corpus(d.vocab, 200);
  Batch b = make_batch(c, 3, 0, 0, 4, d.seq_len);
  Params p = Params::create(d, 7, Params::all_experts(d));
  StepStats plain;
  const double l0 = test::whole_loss(p, b, &plain);
  // the same shift on every expert chooses the same experts; were the bias in the combine weights,
  // the renormalised weights (and the loss) would change
  for (int l = 0; l < d.layers; ++l) std::fill(bias_of(p, l), bias_of(p, l) + d.experts, 0.3f);
  StepStats shifted;
  CHECK(test::whole_loss(p, b, &shifted) == l0);
  CHECK(shifted.expert_counts == plain.expert_counts);
  // a large bias on one expert sends every token of its layer there
  std::fill(bias_of(p, 0), bias_of(p, 0) + d.experts, 0.0f);
  bias_of(p, 0)[5] = 10.0f;
  StepStats pulled;
  test::whole_loss(p, b, &pulled);
  CHECK(pulled.expert_counts[0][5] == uint32_t(4 * d.seq_len));
  CHECK(pulled.expert_counts[1] == plain.expert_counts[1]);
  // the step reports each expert's share of the assignments (one pass: the whole batch)
  REQUIRE(pulled.router_load.size() == 2);
  CHECK(pulled.router_load[0][5] == doctest::Approx(0.5));  // one of each token's two
  double sum = 0;
  for (double f : pulled.router_load[1]) sum += f;
  CHECK(sum == doctest::Approx(1.0));
  // and nothing flows into it: its gradient stays 0
  for (const Unit& g : p.gate)
    for (int e = 0; e < d.experts; ++e) CHECK(g.g[gate_layout(d).bias.offset + size_t(e)] == 0.0f);
}

TEST_CASE("router bias: the balancing step moves each expert toward the mean load, and not a frozen gate's") {
  Dims d = deepseek(true);
  d.experts = 4;
  Params p = Params::create(d, 7, Params::all_experts(d));
  RouterLoad load{{0.5, 0.25, 0.125, 0.125}, {0.25, 0.25, 0.25, 0.25}};
  p.gate[1].frozen = true;
  bias_of(p, 1)[0] = 0.5f;
  REQUIRE(update_router_bias(p, load).ok());
  CHECK(bias_of(p, 0)[0] == -0.01f);  // over the mean: down
  CHECK(bias_of(p, 0)[1] == 0.0f);    // at the mean
  CHECK(bias_of(p, 0)[2] == 0.01f);   // under: up
  CHECK(bias_of(p, 0)[3] == 0.01f);
  CHECK(bias_of(p, 1)[0] == 0.5f);    // frozen: its next weights come from the replay
  p.gate[1].frozen = false;
  REQUIRE(update_router_bias(p, load).ok());
  CHECK(bias_of(p, 0)[0] == -0.02f);
  CHECK(bias_of(p, 1)[0] == 0.5f);  // balanced: unchanged
  // loads of another shape are refused, naming it
  auto bad = update_router_bias(p, RouterLoad{{0.5, 0.5}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("1 layers") != std::string::npos);
  bad = update_router_bias(p, RouterLoad{{0.5, 0.5}, {0.25, 0.25, 0.25, 0.25}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("layer 0 has loads of 2 experts") != std::string::npos);
  // a model without a bias has nothing to move
  Dims none = deepseek(false);
  Params q = Params::create(none, 7, Params::all_experts(none));
  CHECK(gate_layout(none).bias.size == 0);
  CHECK(update_router_bias(q, load).ok());
}

TEST_CASE("router bias: AdamW leaves it as it is (no gradient, no decay, moments 0)") {
  Dims d = deepseek(true);
  Corpus c = test::pattern_corpus(d.vocab, 200);
  Params p = Params::create(d, 7, Params::all_experts(d));
  bias_of(p, 0)[3] = 0.25f;
  const std::vector<float> before = p.gate[0].w;
  test::whole_loss(p, make_batch(c, 3, 0, 0, 4, d.seq_len));
  OptimConfig oc;
  oc.weight_decay = 0.5;
  apply_adamw(p, oc, 0.1, 1.0, 1);
  const Slice b = gate_layout(d).bias;
  CHECK(p.gate[0].w != before);  // the router's matrix moved
  for (size_t i = b.offset; i < b.offset + b.size; ++i) {
    CHECK(p.gate[0].w[i] == before[i]);
    CHECK(p.gate[0].m[i] == 0.0f);
    CHECK(p.gate[0].v[i] == 0.0f);
  }
}

TEST_CASE("router bias: model.bias_update gives moe-llama's gates a bias, and the step") {
  job::ModelConfig m;
  m.kind = "moe-llama", m.d_model = 32, m.heads = 4, m.experts = 6, m.bias_update = 0.001;
  Dims d = job::model_dims(m);
  CHECK(d.router_bias);
  CHECK(d.bias_update == 0.001f);
  CHECK(gate_layout(d).bias.size == 6);
  CHECK(unit_size(d, UnitKind::gate) == 32 * 6 + 6);
  m.bias_update = 0;
  CHECK_FALSE(job::model_dims(m).router_bias);
  CHECK(unit_size(job::model_dims(m), UnitKind::gate) == 32 * 6);
}

TEST_CASE("router bias: without a balancing loss, the experts' loads end more even with the bias than without") {
  double late[2] = {0, 0};
  for (bool bias : {false, true}) {
    Params p = Params::create(deepseek(bias), 1, Params::all_experts(deepseek(bias)));
    int step = 0;
    auto [first, last] = test::train_on_pattern(p, [&](const StepStats& s) {
      if (step++ >= 40) late[bias] += imbalance(s) / 20.0;
    });
    MESSAGE(std::string(bias ? "with" : "without") << " the bias: loss " << first << " -> " << last << ", max/mean load over the last 20 steps "
                                        << late[bias]);
    CHECK(last < 0.6 * first);  // it learns either way
    if (bias) CHECK(*std::max_element(bias_of(p, 0), bias_of(p, 0) + 8) > 0.0f);
  }
  CHECK(late[1] < 0.8 * late[0]);
}

// test_model.cpp — the moe-gpt model end to end in one process: every unit's gradient against
// finite differences of the whole model's loss, the data pipeline's determinism, and a tiny model
// learning a pattern; the logits of a batch against those of each prefix; frozen units (MoEtion's
// replay) passing gradients through without updating.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "model/local_exchange.h"
#include "model/model_checks.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"

using namespace sal;
using namespace sal::model;

namespace {

Dims tiny() {
  Dims d;
  d.layers = 2, d.d = 8, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 5, d.vocab = 11, d.aux_weight = 0.05f;
  return d;
}

using test::pattern_corpus;
double loss(Params& p, const Batch& b, StepStats* stats = nullptr) { return test::whole_loss(p, b, stats); }

}  // namespace

TEST_CASE("every unit's gradient matches finite differences of the whole model's loss") {
  Dims d = tiny();
  Params p = Params::create(d, 7, Params::all_experts(d));
  Corpus c = pattern_corpus(d.vocab, 200);
  Batch b = make_batch(c, 3, 0, 0, 3, d.seq_len);
  StepStats base_stats;
  loss(p, b, &base_stats);
  // keep the analytic gradients
  std::vector<std::vector<float>> grads;
  for (Unit* u : p.units()) grads.push_back(u->g);
  std::mt19937 rng(1);
  int checked = 0, skipped = 0;
  auto units = p.units();
  for (size_t ui = 0; ui < units.size(); ++ui) {
    Unit* u = units[ui];
    CAPTURE(u->id.name());
    for (int trial = 0; trial < 6; ++trial) {
      size_t i = rng() % u->w.size();
      float orig = u->w[i];
      const float eps = 1e-2f;
      StepStats sp, sm;
      u->w[i] = orig + eps;
      double lp = loss(p, b, &sp);
      u->w[i] = orig - eps;
      double lm = loss(p, b, &sm);
      u->w[i] = orig;
      if (sp.expert_counts != base_stats.expert_counts || sm.expert_counts != base_stats.expert_counts) {
        ++skipped;  // the routing flipped: the loss is not smooth here
        continue;
      }
      double fd = (lp - lm) / (2.0 * eps), an = grads[ui][i];
      CHECK(std::fabs(fd - an) <= 2e-2 * std::max(1.0, std::fabs(fd)));
      ++checked;
    }
  }
  CHECK(checked >= int(units.size()) * 4);
  MESSAGE("checked " << checked << " parameters, skipped " << skipped << " where top-k flipped");
}

TEST_CASE("shaped params: the units create makes, the same ids and sizes, every float zero (a restore's target)") {
  Dims d = tiny();
  const std::vector<std::pair<int, int>> held{{0, 1}, {1, 0}};
  Params made = Params::create(d, 5, held), shaped = Params::shaped(d, held);
  auto a = made.units(), b = shaped.units();
  REQUIRE(a.size() == b.size());
  bool drawn = false;
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i]->id.name());
    CHECK(b[i]->id == a[i]->id);
    CHECK(b[i]->w.size() == a[i]->w.size());
    CHECK(b[i]->m.size() == a[i]->m.size());
    CHECK(b[i]->v.size() == a[i]->v.size());
    CHECK(b[i]->g.size() == a[i]->g.size());
    CHECK(std::all_of(b[i]->w.begin(), b[i]->w.end(), [](float x) { return x == 0.0f; }));
    drawn = drawn || std::any_of(a[i]->w.begin(), a[i]->w.end(), [](float x) { return x != 0.0f; });
  }
  CHECK(drawn);  // create draws the initial weights, shaped does not
  CHECK(shaped.parameter_count() == made.parameter_count());
}

TEST_CASE("batches are a pure function of (seed, step) and shares cover the global batch") {
  Corpus c = pattern_corpus(11, 500);
  Batch whole = make_batch(c, 9, 4, 0, 7, 5);
  Batch again = make_batch(c, 9, 4, 0, 7, 5);
  CHECK(whole.inputs == again.inputs);
  CHECK(make_batch(c, 9, 5, 0, 7, 5).inputs != whole.inputs);
  std::vector<int32_t> joined;
  for (int r = 0; r < 3; ++r) {
    auto [first, count] = batch_share(7, 3, r);
    auto part = make_batch(c, 9, 4, first, count, 5);
    joined.insert(joined.end(), part.inputs.begin(), part.inputs.end());
  }
  CHECK(joined == whole.inputs);
  for (size_t i = 0; i + 1 < whole.inputs.size(); ++i)
    if ((i + 1) % 5 != 0) CHECK(whole.targets[i] == whole.inputs[i + 1]);
}

TEST_CASE("a tiny model learns a pattern: the loss falls") {
  Dims d = tiny();
  d.d = 16;
  Params p = Params::create(d, 1, Params::all_experts(d));
  auto [first, last] = test::train_on_pattern(p);
  MESSAGE("loss " << first << " -> " << last);
  CHECK(first > 2.0);        // about ln(11) = 2.4 at the start
  CHECK(last < 0.5 * first);
}

TEST_CASE("decay runs cover every unit in order: the weight matrices decay, biases, norms and positions do not") {
  Dims d = tiny();
  Params p = Params::create(d, 3, Params::all_experts(d));
  auto mask_of = [&d](UnitKind kind, size_t n) {
    std::vector<char> m(n, 0);
    auto mark = [&m](Slice s) { std::fill(m.begin() + long(s.offset), m.begin() + long(s.offset + s.size), 1); };
    switch (kind) {
      case UnitKind::embedding: mark(embedding_layout(d).tok); break;
      case UnitKind::dense: mark(dense_layout(d).w_qkv), mark(dense_layout(d).w_o); break;
      case UnitKind::gate: mark(gate_layout(d).w); break;
      case UnitKind::expert: mark(expert_layout(d).w1), mark(expert_layout(d).w2); break;
    }
    return m;
  };
  for (const Unit* u : p.units()) {
    CAPTURE(int(u->id.kind));
    const size_t n = u->w.size();
    const std::vector<char> want = mask_of(u->id.kind, n);
    const std::vector<DecayRun> runs = decay_runs(d, u->id.kind, n);
    REQUIRE(!runs.empty());
    CHECK(runs.front().begin == 0);
    CHECK(runs.back().end == n);
    for (size_t i = 0; i < runs.size(); ++i) {
      CHECK(runs[i].begin < runs[i].end);
      if (i > 0) CHECK(runs[i].begin == runs[i - 1].end);
      if (i > 0) CHECK(runs[i].decay != runs[i - 1].decay);  // runs are maximal
      for (size_t f = runs[i].begin; f < runs[i].end; ++f) REQUIRE(bool(want[f]) == runs[i].decay);
    }
  }
  CHECK(decay_runs(d, UnitKind::expert, 0).empty());
}

TEST_CASE("the learning rate warms up linearly, then decays along a cosine to min_lr") {
  OptimConfig c;
  c.lr = 1.0, c.warmup = 10, c.total_steps = 110, c.min_lr_ratio = 0.1;
  CHECK(learning_rate(c, 0) == doctest::Approx(0.1));
  CHECK(learning_rate(c, 9) == doctest::Approx(1.0));
  CHECK(learning_rate(c, 60) == doctest::Approx(0.55));
  CHECK(learning_rate(c, 110) == doctest::Approx(0.1));
  CHECK(clip_scale(c, 4.0) == doctest::Approx(0.25));
  CHECK(clip_scale(c, 0.5) == 1.0);
}

TEST_CASE("a validation split: training batches never read the part held out, the validation set only reads it") {
  Dims d = tiny();
  std::mt19937 rng(42);  // random tokens: every window of seq_len + 1 tokens is unique, so it names its offset
  std::vector<uint32_t> tokens(200);
  for (auto& t : tokens) t = uint32_t(rng() % uint32_t(d.vocab));
  Corpus c = Corpus::from_tokens(tokens, "random");
  CHECK(c.validation_size() == 0);
  Batch before = make_batch(c, 3, 4, 0, 6, d.seq_len);
  REQUIRE(c.hold_out(0.25, d.seq_len).ok());
  CHECK(c.train_size() == 150);
  CHECK(c.validation_size() == 50);
  // by offsets: mark every window a batch reads as [off, off + seq_len] and check it lies on its side
  auto offsets = [&](const Batch& b) {
    std::vector<size_t> out;
    for (int s = 0; s < b.sequences; ++s)
      for (size_t off = 0; off + size_t(d.seq_len) < c.size(); ++off)
        if (std::equal(b.inputs.begin() + s * d.seq_len, b.inputs.begin() + (s + 1) * d.seq_len, tokens.begin() + off) &&
            b.targets[size_t(s * d.seq_len + d.seq_len - 1)] == int32_t(tokens[off + size_t(d.seq_len)])) {
          out.push_back(off);
          break;
        }
    return out;
  };
  for (uint64_t step = 0; step < 50; ++step) {
    auto found = offsets(make_batch(c, 3, step, 0, 6, d.seq_len));
    REQUIRE(found.size() == 6);
    for (size_t off : found) CHECK(off + size_t(d.seq_len) < 150);
  }
  Batch val = make_validation_batch(c, 3, 0, 20, d.seq_len);
  auto found = offsets(val);
  REQUIRE(found.size() == 20);
  for (size_t off : found) CHECK(off >= 150);
  // the validation set is fixed: any split of it is the same sequences
  Batch part = make_validation_batch(c, 3, 5, 3, d.seq_len);
  CHECK(std::equal(part.inputs.begin(), part.inputs.end(), val.inputs.begin() + 5 * d.seq_len));
  // none held out: training batches as before; too little to hold out: refused with the numbers
  REQUIRE(c.hold_out(0, d.seq_len).ok());
  CHECK(make_batch(c, 3, 4, 0, 6, d.seq_len).inputs == before.inputs);
  CHECK(c.hold_out(0.01, d.seq_len).error().message().find("holds out 2 of 200 tokens") != std::string::npos);
}

TEST_CASE("evaluate: a batch's loss forward only, the same as the step computes it, and no gradient") {
  Dims d = tiny();
  auto p = Params::create(d, 3, Params::all_experts(d));
  Corpus c = pattern_corpus(d.vocab, 200);
  Batch b = make_batch(c, 5, 0, 0, 4, d.seq_len);
  LocalExchange ex(p);
  p.zero_grads();
  auto weights = p.units()[0]->w;
  auto eval = MoeGpt(p).evaluate(b, 4 * d.seq_len, ex);
  REQUIRE(eval.ok());
  CHECK(eval->tokens == 4 * d.seq_len);
  for (Unit* u : p.units())
    for (float g : u->g) REQUIRE(g == 0.0f);
  CHECK(p.units()[0]->w == weights);
  auto step = MoeGpt(p).step(b, 4 * d.seq_len, ex);
  REQUIRE(step.ok());
  CHECK(eval->ce_sum == step->ce_sum);  // the same kernel on the same logits: bit for bit
}

TEST_CASE("logits of a batch: each position's row is the next-token logits of its prefix, and ids are checked") {
  Dims d = tiny();
  auto p = Params::create(d, 3, Params::all_experts(d));
  MoeGpt m(p);
  LocalExchange ex(p);
  const std::vector<int32_t> ids{1, 4, 9, 2, 7, 10, 0, 3, 3, 5};  // 2 sequences of 5
  auto all = m.logits(ids, 2, 5, ex);
  REQUIRE(all.ok());
  REQUIRE(all->size() == size_t(2 * 5 * d.vocab));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 5; ++t) {
      CAPTURE(b);
      CAPTURE(t);
      std::vector<int32_t> prefix(ids.begin() + b * 5, ids.begin() + b * 5 + t + 1);
      auto next = m.next_logits(prefix, ex);
      REQUIRE(next.ok());
      for (int v = 0; v < d.vocab; ++v)
        CHECK((*all)[size_t((b * 5 + t) * d.vocab + v)] == doctest::Approx((*next)[size_t(v)]).epsilon(1e-5));
    }
  CHECK(m.logits({1, 2, 11}, 1, 3, ex).error().message() == "token id 11 is outside the vocabulary [0, 11)");
  CHECK(m.logits({1, 2, 3}, 2, 2, ex).error().message() == "expected 2 sequences of 2 tokens, got 3 tokens");
}

namespace {

// One forward and backward of `b`; the units for which `freeze` is true are frozen (and stay so).
StepStats frozen_step(Params& p, const Batch& b, const std::function<bool(const Unit&)>& freeze) {
  for (Unit* u : p.units()) u->frozen = freeze(*u);
  LocalExchange ex(p);
  MoeGpt m(p);
  p.zero_grads();
  auto s = m.step(b, 3 * p.dims.seq_len, ex);
  REQUIRE(s.ok());
  return *s;
}

double grad_norm(Params& p) {
  double norm2 = 0;
  for (Unit* u : p.units()) norm2 += grad_sum_squares(*u);
  return std::sqrt(norm2);
}

}  // namespace

TEST_CASE("a frozen unit passes gradients through but computes no weight gradient and takes no update") {
  Dims d = tiny();
  Corpus c = pattern_corpus(d.vocab, 200);
  OptimConfig oc;
  // moments warmed up by one update, so an update that should not happen would show
  Params p0 = Params::create(d, 7, Params::all_experts(d));
  frozen_step(p0, make_batch(c, 3, 1, 0, 3, d.seq_len), [](const Unit&) { return false; });
  apply_adamw(p0, oc, 1e-2, clip_scale(oc, grad_norm(p0)), 1);

  // the same step, once with nothing frozen and once with the embeddings, layer 1's dense part,
  // layer 0's gate and three experts frozen
  Batch b = make_batch(c, 3, 0, 0, 3, d.seq_len);
  Params active = p0, part = p0;
  StepStats sa = frozen_step(active, b, [](const Unit&) { return false; });
  StepStats sp = frozen_step(part, b, [](const Unit& u) {
    return u.id.kind == UnitKind::embedding || (u.id.kind == UnitKind::dense && u.id.layer == 1) ||
           (u.id.kind == UnitKind::gate && u.id.layer == 0) ||
           (u.id.kind == UnitKind::expert && (u.id.expert == 1 || (u.id.layer == 1 && u.id.expert == 2)));
  });
  CHECK(sp.ce_sum == sa.ce_sum);  // the forward is the same
  CHECK(sp.aux == sa.aux);
  // one clip scale for both (replay takes the step's recorded norm: frozen units add nothing to it)
  double scale = clip_scale(oc, grad_norm(active));
  auto part_units = part.units(), active_units = active.units(), before = p0.units();
  for (size_t i = 0; i < part_units.size(); ++i)
    if (!part_units[i]->frozen) {
      CAPTURE(part_units[i]->id.name());
      // the input gradients the frozen units passed on are exactly the active run's, so is every
      // active unit's weight gradient
      CHECK(part_units[i]->g == active_units[i]->g);
    }
  apply_adamw(active, oc, 1e-2, scale, 2);
  apply_adamw(part, oc, 1e-2, scale, 2);
  size_t n_frozen = 0;
  for (size_t i = 0; i < part_units.size(); ++i) {
    CAPTURE(part_units[i]->id.name());
    if (part_units[i]->frozen) {
      ++n_frozen;  // no weight gradient, no update: weights and moments are those it came with
      CHECK(std::all_of(part_units[i]->g.begin(), part_units[i]->g.end(), [](float x) { return x == 0.0f; }));
      CHECK(part_units[i]->w == before[i]->w);
      CHECK(part_units[i]->m == before[i]->m);
      CHECK(part_units[i]->v == before[i]->v);
    } else {
      CHECK(part_units[i]->w == active_units[i]->w);  // and the same update
      CHECK(part_units[i]->m == active_units[i]->m);
    }
  }
  CHECK(n_frozen == 1 + 1 + 1 + 3);
}

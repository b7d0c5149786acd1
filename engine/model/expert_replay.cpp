// expert_replay.cpp — see expert_replay.h.
#include "model/expert_replay.h"

#include <algorithm>
#include <set>
#include <string>

#include "model/expert.h"

namespace sal::model {

size_t IterationLog::bytes() const {
  size_t n = 0;
  for (const auto& [key, r] : rows) n += r.bytes();
  for (const auto& [key, t] : tokens) n += t.bytes();
  return n;
}

namespace {

// One sender's log for the expert in `pass`: its assignments and the layer's tokens, or none (it
// sent the expert nothing).
struct Sent {
  const SentRows* rows = nullptr;
  const TokenRows* tokens = nullptr;
};

Sent sent_by(const IterationLog* log, uint32_t pass, const UnitId& id) {
  if (!log) return {};
  auto it = log->rows.find(LogKey{pass, id.layer, id.expert});
  if (it == log->rows.end()) return {};
  auto t = log->tokens.find(TokenKey{pass, id.layer});
  return {&it->second, t == log->tokens.end() ? nullptr : &t->second};
}

// Checks one sender's record against the plan's shape: a count per rank adding up to the slots
// logged, the layer's tokens logged with their gradients and weights, every slot among them, the
// same holders as the others'.
Status check_sent(const Sent& s, size_t ranks, int d, const std::vector<uint32_t>& holders) {
  const SentRows& r = *s.rows;
  if (r.to.size() != ranks) return fail("its rows go to ", r.to.size(), " ranks, the plan has ", ranks);
  uint64_t total = 0;
  for (uint32_t n : r.to) total += n;
  if (total != r.slots.size()) return fail("it sent ", total, " rows but logged ", r.slots.size());
  if (!s.tokens) return fail("the layer's tokens are not logged");
  const TokenRows& t = *s.tokens;
  const size_t n = d > 0 && t.k > 0 ? t.x.size() / size_t(d) : 0;
  if (n * size_t(d) != t.x.size() || t.dy.size() != t.x.size() || t.w.size() != n * size_t(t.k))
    return fail("the layer's tokens are logged with ", t.x.size(), " input, ", t.dy.size(), " gradient floats and ",
                t.w.size(), " weights: not ", n, " tokens of width ", d, " and k ", t.k, " (its gradients logged?)");
  for (uint32_t slot : r.slots)
    if (slot >= t.w.size()) return fail("slot ", slot, " is past the ", t.w.size(), " assignments logged");
  if (r.holders != holders) return fail("its holders of the expert differ from the other senders'");
  for (uint32_t h : r.holders)
    if (h >= ranks) return fail("holder ", h, " is not a rank of the plan");
  return {};
}

// Holder h's block of one pass: sender 0's rows to h, then sender 1's, … (the exchange's order):
// each slot's input row, and its output gradient as combine_backward made it (w * dy).
void holder_block(const std::vector<Sent>& sent, uint32_t h, int d, ExpertBlock& block, std::vector<float>& dy) {
  block = ExpertBlock{};
  dy.clear();
  for (const Sent& s : sent) {
    if (!s.rows) continue;
    size_t first = 0;
    for (uint32_t i = 0; i < h; ++i) first += s.rows->to[i];
    const TokenRows& t = *s.tokens;
    for (size_t i = first; i < first + s.rows->to[h]; ++i) {
      const uint32_t slot = s.rows->slots[i];
      const size_t token = slot / uint32_t(t.k);
      const float* x = &t.x[token * size_t(d)];
      const float* g = &t.dy[token * size_t(d)];
      const float wt = t.w[slot];
      block.x.insert(block.x.end(), x, x + d);
      for (int j = 0; j < d; ++j) dy.push_back(wt * g[j]);
    }
    block.rows += int(s.rows->to[h]);
  }
}

// The ranks that computed the expert as a shadow in a pass (runtime/shadows.h), ascending: those
// that hold no replica of it yet got rows for it — their own, each from itself alone.
std::vector<uint32_t> shadow_ranks(const std::vector<Sent>& sent, const std::vector<uint32_t>& holders) {
  std::vector<uint32_t> out;
  for (uint32_t j = 0; j < sent.size(); ++j) {
    const Sent& s = sent[j];
    if (s.rows && s.rows->to[j] > 0 && std::find(holders.begin(), holders.end(), j) == holders.end()) out.push_back(j);
  }
  return out;
}

// A pass's forward and backward of holder (or shadow) h's block on `u`, its weight gradient added
// to u.g as the exchange's expert_backward adds it.
void run_block(const Dims& d, Unit& u, const std::vector<Sent>& sent, uint32_t h, ExpertBlock& block,
               std::vector<float>& dy) {
  holder_block(sent, h, d.d, block, dy);
  if (block.rows == 0) return;
  std::vector<float> out(size_t(block.rows) * size_t(d.d)), dx(out.size());
  expert_forward(d, u, block, out.data());
  expert_backward(d, u, block, dy.data(), dx.data());
}

}  // namespace

Status replay_expert_step(const Dims& d, Unit& u, const OptimConfig& c, uint64_t step, double grad_norm,
                          const std::vector<const IterationLog*>& senders) {
  const std::string what = u.id.name() + " at step " + std::to_string(step);
  // the passes any sender logged for the expert, and the holders they name
  std::set<uint32_t> passes;
  std::vector<uint32_t> holders;
  bool first = true;
  for (const IterationLog* log : senders) {
    if (!log) continue;
    for (const auto& [key, r] : log->rows) {
      if (key.layer != u.id.layer || key.expert != u.id.expert) continue;
      passes.insert(key.pass);
      if (first) holders = r.holders, first = false;
    }
  }
  for (size_t j = 0; j < senders.size(); ++j)
    for (uint32_t pass : passes)
      if (Sent sent = sent_by(senders[j], pass, u.id); sent.rows)
        if (auto st = check_sent(sent, senders.size(), d.d, holders); !st)
          return st.error().with_context(what + ": the log of rank " + std::to_string(j));
  // each holder's gradient, pass after pass, as the holder accumulated it; a pass that shadowed
  // the expert adds, at its source (the lowest holder), each shadow's gradient of that pass in rank
  // order, each computed from zero on the same weights (DistributedExchange::return_shadow_grads)
  std::vector<std::vector<float>> partial;
  ExpertBlock block;
  std::vector<float> dy;
  Unit shadow;  // a shadow's computing copy: the same weights, its own gradient (no moments needed)
  shadow.id = u.id;
  shadow.w = u.w;
  shadow.g.resize(u.g.size());
  for (uint32_t h : holders) {
    std::fill(u.g.begin(), u.g.end(), 0.0f);
    for (uint32_t pass : passes) {
      std::vector<Sent> sent;
      for (const IterationLog* log : senders) sent.push_back(sent_by(log, pass, u.id));
      run_block(d, u, sent, h, block, dy);
      if (h != holders.front()) continue;
      for (uint32_t j : shadow_ranks(sent, holders)) {
        std::fill(shadow.g.begin(), shadow.g.end(), 0.0f);
        run_block(d, shadow, sent, j, block, dy);
        for (size_t i = 0; i < u.g.size(); ++i) u.g[i] += shadow.g[i];
      }
    }
    partial.push_back(u.g);
  }
  // the gradient sync: a shared expert's holders summed in ascending order from +0 (expert_grads.h)
  if (partial.size() != 1) {  // none: no sender had rows for it, its gradient is 0
    std::fill(u.g.begin(), u.g.end(), 0.0f);
    for (const auto& p : partial)
      for (size_t i = 0; i < p.size(); ++i) u.g[i] += p[i];
  }
  adamw_unit(d, u, c, learning_rate(c, int64_t(step)), clip_scale(c, grad_norm), int64_t(step) + 1);
  return {};
}

}  // namespace sal::model

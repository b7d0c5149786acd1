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
  return n;
}

namespace {

// The rows sender j logged for the expert in `pass`, or null (it sent none).
const SentRows* sent_by(const IterationLog* log, uint32_t pass, const UnitId& id) {
  if (!log) return nullptr;
  auto it = log->rows.find(LogKey{pass, id.layer, id.expert});
  return it == log->rows.end() ? nullptr : &it->second;
}

// Checks one sender's record against the plan's shape: a count per rank, rows of width d that add
// up to them, the same holders as the others'.
Status check_sent(const SentRows& r, size_t ranks, int d, const std::vector<uint32_t>& holders) {
  if (r.to.size() != ranks) return fail("its rows go to ", r.to.size(), " ranks, the plan has ", ranks);
  if (d <= 0 || r.x.size() % size_t(d) != 0 || r.dy.size() != r.x.size())
    return fail(r.x.size(), " input and ", r.dy.size(), " gradient floats are not rows of width ", d);
  uint64_t total = 0;
  for (uint32_t n : r.to) total += n;
  if (total != r.rows(d)) return fail("it sent ", total, " rows but logged ", r.rows(d));
  if (r.holders != holders) return fail("its holders of the expert differ from the other senders'");
  for (uint32_t h : r.holders)
    if (h >= ranks) return fail("holder ", h, " is not a rank of the plan");
  return {};
}

// Holder h's block of one pass: sender 0's rows to h, then sender 1's, … (the exchange's order).
void holder_block(const std::vector<const SentRows*>& sent, uint32_t h, int d, ExpertBlock& block,
                  std::vector<float>& dy) {
  block = ExpertBlock{};
  dy.clear();
  for (const SentRows* r : sent) {
    if (!r) continue;
    size_t first = 0;
    for (uint32_t i = 0; i < h; ++i) first += r->to[i];
    const size_t n = r->to[h];
    block.x.insert(block.x.end(), r->x.begin() + long(first * size_t(d)), r->x.begin() + long((first + n) * size_t(d)));
    dy.insert(dy.end(), r->dy.begin() + long(first * size_t(d)), r->dy.begin() + long((first + n) * size_t(d)));
    block.rows += int(n);
  }
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
      if (const SentRows* r = sent_by(senders[j], pass, u.id))
        if (auto s = check_sent(*r, senders.size(), d.d, holders); !s)
          return s.error().with_context(what + ": the log of rank " + std::to_string(j));
  // each holder's gradient, pass after pass, as the holder accumulated it
  std::vector<std::vector<float>> partial;
  ExpertBlock block;
  std::vector<float> dy, out, dx;
  for (uint32_t h : holders) {
    std::fill(u.g.begin(), u.g.end(), 0.0f);
    for (uint32_t pass : passes) {
      std::vector<const SentRows*> sent;
      for (const IterationLog* log : senders) sent.push_back(sent_by(log, pass, u.id));
      holder_block(sent, h, d.d, block, dy);
      if (block.rows == 0) continue;
      out.resize(size_t(block.rows) * size_t(d.d));
      dx.resize(out.size());
      expert_forward(d, u, block, out.data());
      expert_backward(d, u, block, dy.data(), dx.data());
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

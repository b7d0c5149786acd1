// sample.cpp — see sample.h.
#include "model/sample.h"

#include <cmath>
#include <random>

#include "model/local_exchange.h"
#include "model/model.h"

namespace sal::model {
namespace {

int draw(const std::vector<float>& logits, double temperature, std::mt19937_64& rng) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  if (temperature <= 0) return int(best);
  std::vector<double> w(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) w[i] = std::exp((double(logits[i]) - logits[best]) / temperature);
  return int(std::discrete_distribution<size_t>(w.begin(), w.end())(rng));
}

}  // namespace

Result<std::string> sample_bytes(Params& p, const SampleOptions& o) {
  if (p.dims.vocab != 256) return fail("sampling text needs a byte-level model (vocab 256), this one has ", p.dims.vocab);
  if (o.prompt.empty()) return fail("the prompt is empty (give at least one byte)");
  std::vector<int32_t> ids;
  for (unsigned char c : o.prompt) ids.push_back(c);
  auto drawn = sample_ids(p, std::move(ids), o.bytes, o);
  if (!drawn) return drawn.error();
  return std::string(drawn->begin(), drawn->end());
}

Result<std::vector<int32_t>> sample_ids(Params& p, std::vector<int32_t> ids, int count, const SampleOptions& o,
                                        int limit) {
  if (ids.empty()) return fail("no prompt tokens to continue");
  if (limit <= 0 || limit > p.dims.vocab) limit = p.dims.vocab;
  std::mt19937_64 rng(o.seed);
  auto m = make_model(p);
  LocalExchange ex(p);
  std::vector<int32_t> out;
  for (int i = 0; i < count; ++i) {
    size_t from = ids.size() > size_t(p.dims.seq_len) ? ids.size() - size_t(p.dims.seq_len) : 0;
    auto logits = m->next_logits({ids.begin() + long(from), ids.end()}, ex);
    if (!logits) return logits.error().with_context("token " + std::to_string(i));
    logits->resize(size_t(limit));
    int next = draw(*logits, o.temperature, rng);
    ids.push_back(next);
    out.push_back(next);
  }
  return out;
}

Result<double> text_loss(Params& p, const std::string& text) {
  int T = p.dims.seq_len;
  if (text.size() < size_t(T) + 1) return fail("the text has ", text.size(), " bytes; at least ", T + 1, " needed");
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(c);
  return ids_loss(p, ids);
}

Result<double> ids_loss(Params& p, const std::vector<int32_t>& ids) {
  int T = p.dims.seq_len;
  if (ids.size() < size_t(T) + 1) return fail("the text has ", ids.size(), " tokens; at least ", T + 1, " needed");
  size_t windows = (ids.size() - 1) / size_t(T);
  Batch b;
  b.sequences = int(windows);
  b.seq_len = T;
  for (size_t w = 0; w < windows; ++w)
    for (int t = 0; t < T; ++t) {
      b.inputs.push_back(ids[w * size_t(T) + size_t(t)]);
      b.targets.push_back(ids[w * size_t(T) + size_t(t) + 1]);
    }
  auto m = make_model(p);
  LocalExchange ex(p);
  auto stats = m->step(b, int64_t(b.inputs.size()), ex);
  if (!stats) return stats.error();
  p.zero_grads();
  return stats->ce_sum / double(b.inputs.size());
}

}  // namespace sal::model

// model.cpp — see model.h: the family-independent parts.
#include "model/model.h"

#include "model/moe_gpt.h"
#include "model/moe_llama.h"

namespace sal::model {

void add_stats(StepStats& a, const StepStats& b) {
  a.ce_sum += b.ce_sum;
  a.aux += b.aux;
  a.z_sum += b.z_sum;
  a.tokens += b.tokens;
  a.expert_rows += b.expert_rows;
  a.expert_cpu_ms += b.expert_cpu_ms;
  if (a.expert_counts.size() < b.expert_counts.size()) a.expert_counts.resize(b.expert_counts.size());
  for (size_t l = 0; l < b.expert_counts.size(); ++l) {
    auto& into = a.expert_counts[l];
    if (into.size() < b.expert_counts[l].size()) into.resize(b.expert_counts[l].size(), 0);
    for (size_t e = 0; e < b.expert_counts[l].size(); ++e) into[e] += b.expert_counts[l][e];
  }
  add_router_load(a.router_load, b.router_load);
}

Result<std::vector<float>> Model::next_logits(const std::vector<int32_t>& ids, ExpertExchange& ex) {
  if (ids.empty()) return fail("no tokens to continue");
  auto all = logits(ids, 1, int(ids.size()), ex);
  if (!all) return all.error();
  const size_t V = all->size() / ids.size();
  return std::vector<float>(all->end() - long(V), all->end());
}

std::unique_ptr<Model> make_model(Params& p) {
  if (p.dims.llama()) return std::make_unique<MoeLlama>(p);
  return std::make_unique<MoeGpt>(p);
}

Status check_tokens(const Dims& d, const std::vector<int32_t>& ids, int B, int T) {
  if (B < 1 || T < 1 || ids.size() != size_t(B) * size_t(T))
    return fail("expected ", B, " sequences of ", T, " tokens, got ", ids.size(), " tokens");
  if (T > d.seq_len) return fail("sequence of ", T, " tokens exceeds model.seq_len = ", d.seq_len);
  for (int32_t id : ids)
    if (id < 0 || id >= d.vocab) return fail("token id ", id, " is outside the vocabulary [0, ", d.vocab, ")");
  return {};
}

}  // namespace sal::model

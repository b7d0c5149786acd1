// digests.cpp — see digests.h.
#include "job/digests.h"

#include <algorithm>

namespace sal::job {

namespace {

// The holders of each digest of one unit.
using Copies = std::map<uint64_t, std::vector<Participant>>;

std::map<uint32_t, Copies> copies_by_unit(const DigestVotes& votes) {
  std::map<uint32_t, Copies> out;
  for (const auto& [who, digests] : votes)
    for (const auto& d : digests) out[d.unit][d.digest].push_back(who);
  return out;
}

Disagreement judge(uint32_t unit, const Copies& copies) {
  size_t holders = 0;
  for (const auto& [digest, who] : copies) holders += who.size();
  Disagreement d;
  d.unit = unit;
  for (const auto& [digest, who] : copies)
    if (2 * who.size() > holders) d.majority = who;
  for (const auto& [digest, who] : copies)
    if (who != d.majority) d.odd.insert(d.odd.end(), who.begin(), who.end());
  std::sort(d.odd.begin(), d.odd.end());
  return d;
}

std::string names(const std::vector<Participant>& ps) {
  std::string s;
  for (const auto& p : ps) s += (s.empty() ? "" : ", ") + participant_name(p);
  return s;
}

// The rank of `p` in the plan's rank order, or -1.
int rank_of(const std::vector<Participant>& ranks, const Participant& p) {
  auto it = std::find(ranks.begin(), ranks.end(), p);
  return it == ranks.end() ? -1 : int(it - ranks.begin());
}

bool holds(const plan::Plan& next, int rank, const UnitId& id) {
  if (id.kind != UnitKind::expert) return true;  // every rank holds the non-expert units
  for (auto [layer, expert] : plan::held_by(next, uint32_t(rank)))
    if (layer == id.layer && expert == id.expert) return true;
  return false;
}

bool same_unit(const wire::UnitTransfer& t, const UnitId& id) {
  return t.kind == uint8_t(id.kind) && t.layer == id.layer && t.expert == id.expert;
}

}  // namespace

std::vector<Disagreement> compare_digests(const DigestVotes& votes) {
  std::vector<Disagreement> out;
  for (const auto& [unit, copies] : copies_by_unit(votes))
    if (copies.size() > 1) out.push_back(judge(unit, copies));
  return out;
}

std::string describe(const Disagreement& d, const ModelShape& shape) {
  const auto units = model_units(shape);
  const std::string name = d.unit < units.size() ? units[d.unit].name() : "unit " + std::to_string(d.unit);
  if (!d.has_majority())
    return name + ": its " + std::to_string(d.odd.size()) + " holders (" + names(d.odd) +
           ") disagree and no copy is held by a majority";
  const bool one = d.odd.size() == 1;
  return name + ": worker" + (one ? " " : "s ") + names(d.odd) + (one ? " disagrees" : " disagree") + " with the " +
         std::to_string(d.majority.size()) + " holders of the majority's copy (" + names(d.majority) + ")";
}

Result<size_t> add_repairs(PlanSwitch& sw, const plan::Plan& next, const std::vector<Repair>& repairs,
                           const ModelShape& shape) {
  const auto units = model_units(shape);
  size_t added = 0;
  for (const Repair& r : repairs) {
    if (r.unit >= units.size()) return fail("a repair names unit ", r.unit, ", which the model does not have");
    const UnitId id = units[r.unit];
    std::vector<int> good, bad;
    for (const auto& p : r.from)
      if (int k = rank_of(sw.ranks, p); k >= 0) good.push_back(k);
    for (const auto& p : r.to)
      if (int k = rank_of(sw.ranks, p); k >= 0) bad.push_back(k);
    if (good.empty()) return fail("no holder of the majority's copy of ", id.name(), " is a rank of the next plan");
    size_t turn = 0;
    auto source = [&] { return uint32_t(good[turn++ % good.size()]); };
    for (auto& t : sw.transfers)
      if (same_unit(t, id) && std::count(bad.begin(), bad.end(), int(t.from))) t.from = source();
    for (int k : bad) {
      if (!holds(next, k, id)) continue;  // the next plan does not give it the unit: nothing to repair
      bool brought = std::any_of(sw.transfers.begin(), sw.transfers.end(),
                                 [&](const wire::UnitTransfer& t) { return same_unit(t, id) && int(t.to) == k; });
      if (brought) continue;
      sw.transfers.push_back({uint8_t(id.kind), int32_t(id.layer), int32_t(id.expert), source(), uint32_t(k)});
      ++added;
    }
  }
  return added;
}

}  // namespace sal::job

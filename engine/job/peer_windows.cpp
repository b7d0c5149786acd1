// peer_windows.cpp — see peer_windows.h.
#include "job/peer_windows.h"

#include <algorithm>

#include "wire/unit_refs.h"

namespace sal::job {
namespace {

UnitId id_of(const wire::SliceUnitRef& r) { return UnitId{UnitKind(r.kind), r.layer, r.expert}; }

// The units each live node holds in complete windows beginning at `from` (that end by `to`).
std::map<NodeId, std::set<UnitId>> held_from(const std::map<NodeId, wire::SliceReport>& reports,
                                             const std::set<NodeId>& live, uint64_t from, uint64_t& to) {
  std::map<NodeId, std::set<UnitId>> out;
  for (const auto& [node, r] : reports) {
    if (!live.count(node)) continue;
    for (const auto& w : r.windows) {
      if (w.from != from) continue;
      to = std::max(to, w.to);
      for (const auto& u : w.units) out[node].insert(id_of(u));
    }
  }
  return out;
}

}  // namespace

std::optional<PeerWindow> restorable_window(const std::map<NodeId, wire::SliceReport>& reports,
                                            const std::set<NodeId>& live, const ModelShape& shape, uint64_t committed,
                                            const std::set<uint64_t>& skip) {
  std::set<uint64_t, std::greater<>> starts;
  for (const auto& [node, r] : reports)
    if (live.count(node))
      for (const auto& w : r.windows)
        if (w.from < committed && !skip.count(w.from)) starts.insert(w.from);
  const auto units = model_units(shape);
  for (uint64_t from : starts) {
    uint64_t to = from;
    auto held = held_from(reports, live, from, to);
    std::set<UnitId> covered;
    for (const auto& [node, ids] : held) covered.insert(ids.begin(), ids.end());
    if (!std::all_of(units.begin(), units.end(), [&](const UnitId& u) { return covered.count(u) > 0; })) continue;
    PeerWindow pw{from, to, {}};
    for (const auto& [node, ids] : held) {
      wire::SliceHolder h{uint32_t(node), {}};
      for (const UnitId& id : ids) h.units.push_back(wire::unit_ref(id));
      pw.holders.push_back(std::move(h));
    }
    return pw;
  }
  return std::nullopt;
}

std::optional<std::string> PeerWindows::report(const wire::SliceReport& r) {
  reports_[NodeId(r.node_id)] = r;
  if (r.refusal.empty()) return std::nullopt;
  uint32_t& said = refusals_said_[NodeId(r.node_id)];
  if (said != 0 && r.refused < said * 10) return std::nullopt;
  said = std::max<uint32_t>(r.refused, 1);
  return "node " + std::to_string(r.node_id) + ": " + r.refusal + " (" + std::to_string(r.refused) + " refused so far)";
}

std::optional<PeerWindow> PeerWindows::restorable(const std::set<NodeId>& live, uint64_t committed) const {
  if (copies_ == 0) return std::nullopt;
  return restorable_window(reports_, live, shape_, committed, failed_);
}

}  // namespace sal::job

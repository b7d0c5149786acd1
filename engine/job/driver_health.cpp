// driver_health.cpp — the job driver and the health policy (see driver.h, work_shares.h): at a
// commit where the speed watch's verdict on a worker changed or a worker's copy was found corrupt
// since the last question (or, while a worker has less than an even share or is named slow, every
// half window of steps) the driver asks the policy what to do; its answer sets each worker's share of the next
// steps' work and may drain nodes. Shares take effect at the next step begun; nothing is re-planned
// for them.
#include <algorithm>

#include "job/driver.h"

namespace sal::job {

void Driver::consult_health(uint64_t step, bool verdict_changed) {
  const uint32_t window = uint32_t(measured_.speed().options().window);
  if (!shares_.due(step, verdict_changed, window, corrupt_copies_)) return;
  act::DecideHealth ask{++decisions_, {}};
  ask.input = shares_.ask(ask.decision, step, applied_->ranks, measured_.speed(), min_workers(), corrupt_copies_);
  out_.push_back(std::move(ask));
}

uint32_t Driver::min_workers() const {
  const uint64_t units = uint64_t(cfg_.model.experts) * cfg_.min_replicas;
  const uint64_t by_slots = cfg_.slots ? (units + cfg_.slots - 1) / cfg_.slots : units;
  return uint32_t(std::max<uint64_t>({1, cfg_.min_replicas, by_slots}));
}

Driver::Next Driver::on_health_decided(const Event& e) {
  const auto& d = std::get<in::HealthDecided>(e);
  if (!shares_.answers(d.decision)) return std::nullopt;
  const SharesApplied a = shares_.apply(d.proposal);
  for (const Participant& p : a.changed_workers) measured_.speed().restart_lag(p);  // new work, new lag
  if (a.changed)
    note("work_shares", d.decided_by + ": " + d.proposal.note + " (shares: " + a.text + ")",
         a.text == "even" ? act::Level::info : act::Level::warn);
  for (NodeId node : a.drain) {
    const std::string why = d.decided_by + ": " + d.proposal.note;
    out_.push_back(act::Note{"node_drained", "node " + std::to_string(node) + " drained by the health policy (" + why + ")",
                             act::Level::warn, false, node});
    out_.push_back(act::Drain{node, why});
  }
  return std::nullopt;
}

}  // namespace sal::job

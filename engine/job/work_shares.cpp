// work_shares.cpp — see work_shares.h.
#include "job/work_shares.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace sal::job {
namespace {

constexpr double kThousandths = 1000;

// Every worker's corrupt copies together (a new one is a reason to ask).
uint64_t total(const std::map<Participant, uint64_t>& corrupt) {
  uint64_t n = 0;
  for (const auto& [who, c] : corrupt) n += c;
  return n;
}

}  // namespace

bool WorkShares::due(uint64_t step, bool verdict_changed, uint32_t window,
                     const std::map<Participant, uint64_t>& corrupt) const {
  if (verdict_changed || total(corrupt) != corrupt_seen_) return true;
  return (!shares_.empty() || slow_seen_) && step >= asked_step_ + std::max<uint32_t>(1, window / 2);
}

policy::HealthInput WorkShares::ask(uint64_t decision, uint64_t step, const std::vector<Participant>& ranks,
                                    const SpeedWatch& speed, uint32_t min_workers,
                                    const std::map<Participant, uint64_t>& corrupt) {
  policy::HealthInput in;
  in.step = step;
  in.window = uint32_t(speed.options().window);
  in.slow_ratio = speed.options().slow_ratio;
  in.back_ratio = speed.options().back_ratio;
  in.min_workers = min_workers;
  const std::vector<WorkerHealth> report = speed.report();
  for (const Participant& p : ranks) {
    policy::WorkerHealthInfo w;
    w.name = participant_name(p);
    w.node = p.node;
    w.share = share(p);
    if (auto c = corrupt.find(p); c != corrupt.end()) w.corrupt = c->second;
    auto it = std::find_if(report.begin(), report.end(), [&](const WorkerHealth& h) { return h.who == p; });
    if (it != report.end())
      w.ratio = it->ratio, w.lag = it->lag, w.slow = it->slow, w.steps = it->steps, w.since_step = it->since_step;
    in.workers.push_back(std::move(w));
  }
  asked_ = ranks;
  asked_decision_ = decision;
  asked_step_ = step;
  corrupt_seen_ = total(corrupt);
  slow_seen_ = std::any_of(in.workers.begin(), in.workers.end(), [](const auto& w) { return w.slow; });
  return in;
}

SharesApplied WorkShares::apply(const policy::HealthProposal& p) {
  SharesApplied out;
  for (size_t i = 0; i < asked_.size() && i < p.shares.size(); ++i) {
    const double s = std::min(1.0, p.shares[i]);
    if (std::fabs(s - share(asked_[i])) > 1e-9) out.changed_workers.push_back(asked_[i]);
    if (s < 1) shares_[asked_[i]] = s;
    else shares_.erase(asked_[i]);
  }
  std::set<NodeId> nodes;
  for (uint32_t w : p.drain)
    if (w < asked_.size() && nodes.insert(asked_[w].node).second) out.drain.push_back(asked_[w].node);
  for (const auto& [who, s] : shares_) {
    char b[48];
    std::snprintf(b, sizeof b, "%s %.2f", participant_name(who).c_str(), s);
    out.text += (out.text.empty() ? "" : ", ") + std::string(b);
  }
  if (out.text.empty()) out.text = "even";
  out.changed = !out.changed_workers.empty();
  asked_decision_ = 0;
  return out;
}

std::vector<uint32_t> WorkShares::for_step(const std::vector<Participant>& ranks) const {
  if (std::none_of(ranks.begin(), ranks.end(), [&](const Participant& p) { return shares_.count(p); })) return {};
  std::vector<uint32_t> out;
  for (const Participant& p : ranks) out.push_back(uint32_t(std::lround(share(p) * kThousandths)));
  return out;
}

double WorkShares::share(const Participant& who) const {
  auto it = shares_.find(who);
  return it == shares_.end() ? 1.0 : it->second;
}

void WorkShares::keep_only(const std::vector<Participant>& ranks) {
  std::erase_if(shares_, [&](const auto& s) { return std::find(ranks.begin(), ranks.end(), s.first) == ranks.end(); });
}

}  // namespace sal::job

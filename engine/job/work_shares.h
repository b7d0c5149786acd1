// work_shares.h — each worker's share of a step's work, as the health policy last decided it, and
// when to ask it again. A share is relative to an even part (1: even; 0.5: half of one); the
// workers get them as thousandths in StepBegin, and split the batch's sequences and the experts'
// tokens by them (core/apportion.h). Pure logic: the driver asks (act::DecideHealth) at a commit
// where the speed watch's verdict on some worker changed, and every half window of steps while a
// worker has less than an even share (so its share follows its lag) or was named slow at the last
// question (a policy that kept a slow worker's share, its lag in range then, looks again); it hands
// the answer back here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ids.h"
#include "job/health.h"
#include "policy/decision.h"

namespace sal::job {

// What the health policy's answer changes.
struct SharesApplied {
  std::vector<NodeId> drain;  // nodes to drain (each once)
  std::vector<Participant> changed_workers;  // those whose share changed
  bool changed = false;       // some worker's share changed
  std::string text;           // "2.0 0.50, 3.0 1.00" — the shares that are not even, or "even"
};

class WorkShares {
 public:
  // Whether to ask at this commit (`corrupt`: each worker's copies found corrupt so far; a new one
  // is a reason to ask).
  bool due(uint64_t step, bool verdict_changed, uint32_t window, const std::map<Participant, uint64_t>& corrupt) const;
  // The question for the plan's ranks (rank order), from the speed watch's report and the corrupt
  // copies; remembered, with `decision`, for the answer.
  policy::HealthInput ask(uint64_t decision, uint64_t step, const std::vector<Participant>& ranks,
                          const SpeedWatch& speed, uint32_t min_workers,
                          const std::map<Participant, uint64_t>& corrupt = {});
  // The answer to the question numbered `decision` (another one's is ignored: false).
  bool answers(uint64_t decision) const { return decision != 0 && decision == asked_decision_; }
  SharesApplied apply(const policy::HealthProposal& p);

  // Each rank's share in thousandths of an even part; empty when every share is even.
  std::vector<uint32_t> for_step(const std::vector<Participant>& ranks) const;
  double share(const Participant& who) const;
  size_t lightened() const { return shares_.size(); }  // workers with less than an even share
  // Forgets workers that left the plan.
  void keep_only(const std::vector<Participant>& ranks);

 private:
  std::map<Participant, double> shares_;  // only those below 1
  std::vector<Participant> asked_;        // the last question's workers, in its order
  uint64_t asked_decision_ = 0, asked_step_ = 0;
  uint64_t corrupt_seen_ = 0;  // the corrupt copies counted at the last question
  bool slow_seen_ = false;     // some worker was named slow at the last question
};

}  // namespace sal::job

// steps.cpp — see steps.h.
#include "job/steps.h"

namespace sal::job {

void StepCoordinator::begin(Epoch epoch, std::vector<Participant> who) {
  in_flight_ = true;
  epoch_ = epoch;
  participants_ = std::set<Participant>(who.begin(), who.end());
  voted_.clear();
  patching_ = false;
}

void StepCoordinator::patch(std::vector<Participant> who) {
  if (!in_flight_) return;
  participants_ = std::set<Participant>(who.begin(), who.end());
  voted_.clear();
  patching_ = true;
}

StepCoordinator::Outcome StepCoordinator::vote(Participant who, Epoch epoch, StepId step, bool ok,
                                               const std::string& detail) {
  if (!in_flight_ || epoch != epoch_ || step != committed_ || !participants_.count(who) ||
      voted_.count(who))
    return Outcome::ignored;
  if (!ok)
    return finish_abort("worker " + std::to_string(who.node) + "." + std::to_string(who.index) +
                        " voted no: " + detail);
  voted_.insert(who);
  if (voted_.size() < participants_.size()) return Outcome::pending;
  in_flight_ = false;
  ++committed_;
  patched_ += patching_;
  return Outcome::committed;
}

StepCoordinator::Outcome StepCoordinator::lost(NodeId node, const std::string& why) {
  if (!in_flight_) return Outcome::ignored;
  for (const auto& p : participants_)
    if (p.node == node) return finish_abort(why);
  return Outcome::ignored;
}

StepCoordinator::Outcome StepCoordinator::lost_worker(Participant who, const std::string& why) {
  if (!in_flight_ || !participants_.count(who)) return Outcome::ignored;
  return finish_abort(why);
}

StepCoordinator::Outcome StepCoordinator::abort(const std::string& why) {
  if (!in_flight_) return Outcome::ignored;
  return finish_abort(why);
}

StepCoordinator::Outcome StepCoordinator::finish_abort(const std::string& why) {
  in_flight_ = false;
  ++aborted_;
  last_abort_ = why;
  return Outcome::aborted;
}

}  // namespace sal::job

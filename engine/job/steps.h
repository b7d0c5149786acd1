// steps.h — step commit: "a step is applied everywhere or nowhere". The controller begins step s
// with a fixed set of participants (the ready workers of usable nodes at that moment); each votes
// once; the step commits when every participant voted yes, and aborts at once if one votes no or is
// lost. An aborted step is begun again with the participants left. Workers that become ready
// mid-step join at the next step boundary. Pure logic — the controller does the messaging.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/ids.h"

namespace sal::job {

// The reason the driver gives a step it aborts because the job stops: "job stopping: <why>". The
// run report tells a stop from a failure by it (report/run_files.cpp).
inline constexpr std::string_view kStopReason = "job stopping: ";

class StepCoordinator {
 public:
  enum class Outcome { pending, committed, aborted, ignored };

  // Next step to run (== committed count, as steps number from 0).
  StepId next_step() const { return committed_; }
  StepId committed() const { return committed_; }
  uint64_t aborted() const { return aborted_; }
  bool in_flight() const { return in_flight_; }
  Epoch epoch() const { return epoch_; }
  const std::set<Participant>& participants() const { return participants_; }
  const std::string& last_abort_reason() const { return last_abort_; }

  // Starts step next_step() with these participants under membership epoch `epoch`.
  void begin(Epoch epoch, std::vector<Participant> who);

  // A vote: counts only for the step in flight, from a participant, once.
  Outcome vote(Participant who, Epoch epoch, StepId step, bool ok, const std::string& detail);

  // SPARe's patch: the step in flight goes on with `who` (the participants left), their votes
  // counted afresh; it counts as patched once it commits.
  void patch(std::vector<Participant> who);
  uint64_t patched() const { return patched_; }
  // A participant (or every participant of a node) is gone: aborts the step in flight.
  Outcome lost(NodeId node, const std::string& why);
  Outcome lost_worker(Participant who, const std::string& why);
  Outcome abort(const std::string& why);
  // A restore from a checkpoint of step `to`: the steps go on from it. Usually the steps after it
  // run again; a snapshot ahead of the committed steps (written before an earlier rollback: a
  // state the job did reach) moves them forward. Not while one is in flight.
  void restore_to(StepId to) {
    if (!in_flight_) committed_ = to;
  }
  // A resumed job: `committed` steps were committed before the controller restarted, the last of
  // them begun in `epoch`.
  void resume(StepId committed, Epoch epoch) {
    committed_ = committed;
    epoch_ = epoch;
  }

 private:
  Outcome finish_abort(const std::string& why);

  StepId committed_ = 0;
  uint64_t aborted_ = 0;
  uint64_t patched_ = 0;
  bool in_flight_ = false;
  bool patching_ = false;  // the step in flight was patched
  Epoch epoch_ = 0;
  std::set<Participant> participants_;
  std::set<Participant> voted_;
  std::string last_abort_;
};

}  // namespace sal::job

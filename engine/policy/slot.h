// slot.h — a policy slot: the live generation of one kind of policy, the previous generation kept
// warm for rollback, and a C++ floor policy underneath.
//
// Loading is all-or-nothing (Redis's replace-with-relink): load the text in a fresh state → check
// the module's shape → run its selftest → replay the recent decision inputs through it and the
// C++ validators → migrate save()/restore() state → swap. If any step fails the live generation
// is untouched and the error says which step and why. Everything but the swap works on a
// snapshot of the slot (prepare), so it can run off the controller's loop (policy.load does); the
// swap (install) happens on the loop, between two decisions.
//
// Deciding never fails: a decision that raises, overruns its budget, or is refused by the
// validators is replaced by the previous generation's decision, else the floor policy's, and is
// counted; three failures in a row, or three in a new generation's first twenty decisions, roll
// the slot back by itself.
//
// Questions are pure. An operator's "what would you decide for this ctx?" (policy.decide) and
// "what would this candidate decide differently?" (policy.diff) are answered from a SlotSnapshot:
// the live and previous generations' sources and the states their save() returned after their
// latest decisions (kept by the slot as it goes: generation.h), the latest input and the last
// proposal. Answering loads copies of the generations from that, off the controller's loop, and
// asks them; nothing it does reaches the slot — not its replay inputs, its last decision, its
// counters nor its rollback — nor the live generations' own Lua states. Taking the snapshot runs
// no policy code.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "policy/generation.h"
#include "policy/kinds.h"

namespace sal::policy {

struct Decision {
  Proposal proposal;
  std::string decided_by;  // "mro gen 3", "lazarus gen 1 (previous)", "floor"
  std::string problem;     // why the live generation did not decide, if it did not
  double ms = 0;
};

// What a candidate would decide differently from the live generation on the latest input.
struct DiffReport {
  std::string candidate;   // "mro (a1b2c3...)"
  std::string live;
  std::string summary;     // the kind's diff text, or "no decision recorded yet"
};

struct SlotEvent {
  std::string kind;    // policy_loaded, policy_refused, policy_rollback, policy_fallback
  std::string detail;
};

struct SlotSnapshot {
  // What a copy of a generation is made from.
  struct Recipe {
    Source source;
    uint64_t number = 0;
    std::shared_ptr<lua::Sandbox> state;  // what its save() returned last (null: nothing kept)
    std::string state_problem;            // why its last save() kept nothing, if it failed
  };
  Kind kind = Kind::allocation;
  GenerationEnv env;  // the copies' environment: no service function (they run off the loop)
  std::optional<Recipe> live, previous;
  std::optional<Input> latest;                 // the slot's latest decision input
  std::optional<Proposal> last_proposal;       // and what it decided then
  std::deque<Input> recent;                    // the inputs a candidate is replayed on
  uint64_t version = 0;                        // the slot's Slot::version() when taken
};

// What the slot would decide for `in` — the live copy, else the previous one, else the floor —
// with the problem that made it fall back; nothing is recorded anywhere.
Decision answer(const SlotSnapshot& snap, const Input& in);
// What `candidate` would decide differently from the live generation on the latest input.
Result<DiffReport> diff(const SlotSnapshot& snap, const Source& candidate);
// A new generation made ready from a snapshot, touching no slot: load, shape check, selftest,
// replay of the snapshot's recent inputs through the validators, and migration of the state the
// live generation's save() kept into its restore(). Runs anywhere (policy.load runs it off the
// controller's loop); Slot::install puts the result in force.
Result<std::unique_ptr<Generation>> prepare(const SlotSnapshot& snap, const Source& src);

class Slot {
 public:
  // Consecutive failures, and failures in a new generation's probation, that trigger a rollback.
  static constexpr int kFailuresToRollback = 3;
  static constexpr uint64_t kProbationDecisions = 20;
  // Recent decision inputs kept for replay and diff.
  static constexpr size_t kReplayInputs = 16;

  Slot(Kind kind, GenerationEnv env);

  Kind kind() const { return kind_; }
  // prepare() on a snapshot taken now, then install(): the whole load, here.
  Status load(const Source& src, const std::string& who);
  // Puts a prepared generation in force (or reports why it was not prepared) — refused when the
  // slot changed (a load or a rollback) since the snapshot it was prepared from, version
  // `snapshot_version`: its replay and migration were against another live generation.
  Status install(Result<std::unique_ptr<Generation>> prepared, const Source& src, uint64_t snapshot_version,
                 const std::string& who);
  // Bumped by every load and rollback.
  uint64_t version() const { return version_; }
  Status reload(const std::string& who);  // the live generation's origin, read again by `reread`
  Result<Source> reload_source() const;   // what reload() loads
  Status rollback(const std::string& who);
  Decision decide(const Input& in);
  // Pure: the same as policy::diff on a snapshot taken now.
  Result<DiffReport> diff(const Source& candidate);
  // What a pure question is answered from (see above); runs no policy code.
  SlotSnapshot snapshot() const;

  const Generation* live() const { return live_.get(); }
  const Generation* previous() const { return previous_.get(); }
  uint64_t generations_loaded() const { return counter_; }
  uint64_t floor_decisions() const { return floor_decisions_; }
  const std::deque<Input>& recent_inputs() const { return recent_; }
  const std::optional<Decision>& last_decision() const { return last_; }

  std::function<void(const SlotEvent&)> on_event;
  // Every decision, as decide() returns it (the controller exports the decision times).
  std::function<void(const Decision&)> on_decision;
  // Re-reads a generation's source for reload() (files change; embedded sources do not).
  std::function<Result<Source>(const Source&)> reread;

 private:
  void emit(const std::string& kind, const std::string& detail);
  void note_failure(const std::string& problem);

  Kind kind_;
  GenerationEnv env_;
  std::unique_ptr<Generation> live_, previous_;
  std::deque<Input> recent_;
  std::optional<Decision> last_;
  uint64_t counter_ = 0;
  uint64_t floor_decisions_ = 0;
  int consecutive_failures_ = 0;
  uint64_t version_ = 0;
};

}  // namespace sal::policy

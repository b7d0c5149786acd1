// policy_set.h — the four policy slots of a job (allocation, placement, checkpoint, redundancy),
// the resolver that finds policy text, and the environment every generation gets (budget, memory
// cap, sal.*, require). The controller owns one; the CLI builds one for offline checks and plans.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "policy/slot.h"
#include "policy/sources.h"

namespace sal::policy {

struct PolicyOptions {
  int64_t budget_ms = 500;
  size_t memory_limit = 64u << 20;
  std::vector<std::string> search_dirs;  // empty: the defaults of SourceResolver
  std::function<void()> service;         // run every few ms during policy calls (GenerationEnv)
};

class PolicySet {
 public:
  explicit PolicySet(PolicyOptions opts = {});

  Slot& slot(Kind k) { return *slots_[size_t(k)]; }
  const Slot& slot(Kind k) const { return *slots_[size_t(k)]; }
  const SourceResolver& resolver() const { return resolver_; }

  // Resolves a name, path or text and loads it into the slot (all-or-nothing).
  Status load(Kind k, const std::string& what, const std::string& who);
  Result<DiffReport> diff(Kind k, const std::string& what);

  // Loads a fresh generation without a slot: `salamander policy check`.
  Result<std::unique_ptr<Generation>> check(Kind k, const std::string& what) const;

  // Events of every slot (loaded, refused, rollback, fallback), tagged with the slot's kind.
  std::function<void(Kind, const SlotEvent&)> on_event;
  // Every slot's decisions, tagged with the slot's kind.
  std::function<void(Kind, const Decision&)> on_decision;

  const GenerationEnv& env() const { return env_; }

 private:
  PolicyOptions opts_;
  SourceResolver resolver_;
  GenerationEnv env_;
  std::array<std::unique_ptr<Slot>, std::size(kKinds)> slots_;
};

// Loads a policy file standalone, guessing its kind from the module's `kind` field.
Result<std::unique_ptr<Generation>> check_file(const std::string& path, const PolicyOptions& opts = {});

}  // namespace sal::policy

// ids.h — identifiers shared by every part of the engine: nodes (one agent each), workers
// (participants), membership epochs (bumped by every membership change), training steps, and roles
// of REPL sessions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sal {

using NodeId = uint32_t;   // assigned by the controller at registration; never reused in a job
using Epoch = uint64_t;    // membership epoch; every join, death or departure bumps it
using StepId = uint64_t;   // training step number (committed steps are never lost)

constexpr NodeId kNoNode = UINT32_MAX;

// A worker of the job: its node and its index there (node.index in logs). A plan's ranks are
// participants in rank order.
struct Participant {
  NodeId node = kNoNode;
  uint32_t index = 0;
  auto operator<=>(const Participant&) const = default;
};

// "3.1": node 3, worker 1 (as logs and events name a worker).
std::string participant_name(const Participant& p);
// Whether `p` is one of `list`.
bool contains(const std::vector<Participant>& list, const Participant& p);

// What a REPL session may do. Loopback sessions are admin; CURVE sessions get the role their key
// has in the allowlist. Each role includes the ones below it.
enum class Role : uint8_t { observe = 0, operate = 1, admin = 2 };

std::string_view role_name(Role r);
std::optional<Role> parse_role(std::string_view s);

}  // namespace sal

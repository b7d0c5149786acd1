// ids.cpp — names of roles (used by the allowlist parser, the REPL and the audit log) and of workers.
#include "core/ids.h"

#include <algorithm>

namespace sal {

std::string_view role_name(Role r) {
  switch (r) {
    case Role::observe: return "observe";
    case Role::operate: return "operate";
    case Role::admin: return "admin";
  }
  return "?";
}

std::optional<Role> parse_role(std::string_view s) {
  if (s == "observe") return Role::observe;
  if (s == "operate") return Role::operate;
  if (s == "admin") return Role::admin;
  return std::nullopt;
}

std::string participant_name(const Participant& p) { return std::to_string(p.node) + "." + std::to_string(p.index); }

bool contains(const std::vector<Participant>& list, const Participant& p) {
  return std::find(list.begin(), list.end(), p) != list.end();
}

}  // namespace sal

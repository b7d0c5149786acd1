// ids.cpp — names of roles (used by the allowlist parser, the REPL and the audit log).
#include "core/ids.h"

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

}  // namespace sal

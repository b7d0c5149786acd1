// decide.h — what the policy tests share: a shipped policy (or source text) loaded as a fresh
// generation, asked to decide, and its proposal checked by the C++ validators.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "policy/kinds.h"
#include "policy/policy_set.h"

namespace sal::policy::test {

inline Proposal decide_valid(PolicySet& set, Kind k, const std::string& name, const Input& in) {
  auto g = set.check(k, name);
  REQUIRE_MESSAGE(g.ok(), g.error().message());
  auto p = (*g)->decide(in);
  REQUIRE_MESSAGE(p.ok(), name << ": " << p.error().message());
  auto s = ops_for(k).validate(*p, in);
  REQUIRE_MESSAGE(s.ok(), name << ": " << s.error().message());
  return *p;
}

}  // namespace sal::policy::test

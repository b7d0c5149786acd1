// sources.h — where policy text comes from. A slot is given a name ("mro"), a path
// ("my/placement.lua") or the text itself (REPL: policy.load("placement", [[return {...}]])). Names
// resolve to <dir>/<kind>/<name>.lua in the search directories — $SALAMANDER_POLICIES, then the
// policies/ folder beside the binary's build directory (so edits in a checkout take effect on
// reload) — and finally to the copies compiled into the binary, so `salamander` works anywhere.
// `require "name"` in a policy resolves the same way under lib/.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "policy/decision.h"
#include "policy/generation.h"

namespace sal::policy {

class SourceResolver {
 public:
  // Uses $SALAMANDER_POLICIES and <exe dir>/../policies unless `dirs` is given.
  explicit SourceResolver(std::vector<std::string> dirs = {});

  // A name, a .lua path, or Lua text (anything containing a newline or "return"). A relative path
  // is read against `base_dir` when one is given (a local REPL client's directory), else the cwd.
  Result<Source> resolve(Kind kind, const std::string& what, const std::string& base_dir = "") const;
  Result<Source> library(const std::string& name) const;
  // Reads a source again from where it came from (files may have changed).
  Result<Source> reread(const Source& s) const;
  // Shipped policy names of a kind (embedded), for `policy.list` and completion.
  std::vector<std::string> shipped(Kind kind) const;
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  Result<Source> named(const std::string& folder, const std::string& name) const;
  std::vector<std::string> dirs_;
};

// Text a client handed in, named `name` (its file's name: errors say name:line).
Source given_source(std::string text, std::string name);

// The policies/ tree compiled into the binary: ("placement/mro", text) pairs.
const std::vector<std::pair<std::string, std::string>>& embedded_policies();

}  // namespace sal::policy

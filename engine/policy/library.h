// library.h — the algorithm library as Lua policies see it: a read-only global table `sal` of C++
// functions (docs/policies.md lists them). Policies stay short because the heavy lifting —
// matchings, flows, recovery probabilities, rulers, closed forms, window search — is here.
#pragma once

#include "lua/sandbox.h"

namespace sal::policy {

// Installs `sal` into a fresh policy state.
void install_library(lua::Sandbox& sb);

}  // namespace sal::policy

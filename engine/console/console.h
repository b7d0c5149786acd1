// console.h — the operators' console attached to a controller (mesh/attachment.h): the REPL
// endpoint (repl_server.h) bound where repl.bind says, with the job's budget, memory cap and
// session limit, CURVE and the operator allowlist when it is reachable from other hosts, the audit
// log in the run directory, and the REPL modules registered from above the console (the CLI adds
// the simulator's sim.*). The endpoint is also written to the user's runtime directory
// (last-repl), where `salamander repl` with no endpoint finds it. A local endpoint (no CURVE) admits
// only sessions with the job's token, written (0600) to the run directory's repl.token and to the
// runtime directory for its endpoint (wire/repl_token.h), that copy removed when the job ends.
#pragma once

#include <functional>
#include <string>

#include "job/config.h"
#include "lua/registry.h"
#include "mesh/attachment.h"

namespace sal::console {

mesh::Attach attach(const job::ReplConfig& repl, const std::string& run_dir,
                    std::function<void(lua::ApiRegistry&)> modules = {});

}  // namespace sal::console

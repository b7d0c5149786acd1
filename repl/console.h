// console.h — `salamander repl`: the interactive Lua prompt attached to a live controller
// (libedit line editing and history, multi-line chunks, Tab completion computed by the server),
// and the one-shot mode `-e CHUNK [--json]` for scripts and tests.
#pragma once

#include <string>

#include "repl/client.h"

namespace sal::repl {

struct ConsoleOptions {
  ClientOptions client;
  std::string eval;      // -e CHUNK: evaluate once and exit
  bool json = false;     // print values as JSON (with -e)
};

// Returns the process exit code: 0, 1 when the chunk failed, 2 when the controller is unreachable.
int run_console(const ConsoleOptions& opts);

}  // namespace sal::repl

// cmd_repl.cpp — `salamander repl [ENDPOINT] [-e CHUNK] [--json]`.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/paths.h"
#include "core/strings.h"
#include "repl/console.h"
#include "wire/curve.h"

namespace sal::cli {
namespace {

// The endpoint of the most recently started controller on this machine, if any.
std::string last_endpoint() {
  auto dir = runtime_dir();
  if (!dir) return "";
  auto text = read_file(*dir + "/last-repl", 4096);
  return text ? std::string(trim(*text)) : "";
}

}  // namespace

int cmd_repl(const Args& args) {
  Command cmd{"repl", "repl [ENDPOINT] [-e CHUNK [--json]] [options]",
              "A Lua prompt inside a live controller. Without ENDPOINT: $SALAMANDER_REPL, else the "
              "controller most recently started on this machine.",
              {{"-e", "CHUNK", "evaluate CHUNK, print the result and exit (non-zero on error)"},
               {"--json", "", "with -e: print the result as JSON"},
               {"--server-key", "KEY", "CURVE: the controller's public key (Z85 or a .pub file)"},
               {"--key", "FILE", "CURVE: your key pair (.key file)"},
               {"--timeout-ms", "MS", "give up on a reply after MS (default: the server's budget + 5 s)"}},
              1};
  int code = 0;
  auto p = parse_command(cmd, args, code);
  if (!p) return code;
  if (auto s = setup_logging(*p, "repl"); !s) return usage_error(cmd, s.error().message());
  repl::ConsoleOptions o;
  o.client.endpoint = !p->positional.empty() ? p->positional[0]
                      : std::getenv("SALAMANDER_REPL") ? std::getenv("SALAMANDER_REPL")
                                                      : last_endpoint();
  if (o.client.endpoint.empty())
    return usage_error(cmd, "no endpoint given and no controller found on this machine (start one with salamander run)");
  o.eval = p->get_or("-e", "");
  o.json = p->has("--json");
  if (o.json && o.eval.empty()) return usage_error(cmd, "--json goes with -e CHUNK");
  auto timeout = p->get_int("--timeout-ms", 0, 0, 86400000);
  if (!timeout) return usage_error(cmd, timeout.error().message());
  o.client.timeout_ms = *timeout;
  if (auto k = p->get("--server-key")) {
    auto key = wire::resolve_public_key(*k);
    if (!key) return usage_error(cmd, "--server-key: " + key.error().message());
    o.client.server_public_key = *key;
    o.client.key_file = p->get_or("--key", "");
    if (o.client.key_file.empty()) return usage_error(cmd, "--server-key needs --key FILE (your key pair)");
  }
  return repl::run_console(o);
}

}  // namespace sal::cli

// cmd_repl.cpp — `salamander repl [ENDPOINT] [-e CHUNK] [--json]`: the endpoint (given, from
// $SALAMANDER_REPL, or the last one this user started), its CURVE keys or local token file.
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

int cmd_repl(const Command& cmd, const Parsed& p) {
  if (auto s = setup_logging(p, "repl"); !s) return usage_error(cmd, s.error().message());
  repl::ConsoleOptions o;
  o.client.endpoint = !p.positional.empty() ? p.positional[0]
                      : std::getenv("SALAMANDER_REPL") ? std::getenv("SALAMANDER_REPL")
                                                      : last_endpoint();
  if (o.client.endpoint.empty())
    return usage_error(cmd, "no endpoint given and no controller of yours found on this machine (start one with salamander run)");
  o.eval = p.get_or("-e", "");
  o.json = p.has("--json");
  if (o.json && o.eval.empty()) return usage_error(cmd, "--json goes with -e CHUNK");
  auto timeout = p.get_int("--timeout-ms", 0, 0, 86400000);
  if (!timeout) return usage_error(cmd, timeout.error().message());
  o.client.timeout_ms = *timeout;
  o.client.token_file = p.get_or("--token-file", "");
  if (auto k = p.get("--server-key")) {
    auto key = wire::resolve_public_key(*k);
    if (!key) return usage_error(cmd, "--server-key: " + key.error().message());
    o.client.server_public_key = *key;
    o.client.key_file = p.get_or("--key", "");
    if (o.client.key_file.empty()) return usage_error(cmd, "--server-key needs --key FILE (your key pair)");
  }
  return repl::run_console(o);
}

}  // namespace sal::cli

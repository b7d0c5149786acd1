// cmd_agent.cpp — `salamander agent --controller ENDPOINT [--devices cpu:K|cuda:0,1]`: one node.
#include <signal.h>
#include <unistd.h>

#include <zmq.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/devices.h"
#include "core/heap.h"
#include "core/lifetime.h"
#include "mesh/agent.h"
#include "wire/curve.h"

namespace sal::cli {

int cmd_agent(const Command& cmd, const Parsed& p) {
  keep_large_blocks();  // slots, frames and migrations reuse their memory (core/heap.h)
  mesh::AgentOptions o;
  o.controller = p.get_or("--controller", "");
  if (o.controller.empty()) return usage_error(cmd, "--controller ENDPOINT is required");
  auto devices = parse_devices(p.get_or("--devices", "cpu:1"));
  if (!devices) return usage_error(cmd, "--devices: " + devices.error().message());
#ifndef SAL_HAVE_CUDA
  for (auto& d : *devices)
    if (d.rfind("cuda:", 0) == 0)
      return usage_error(cmd, "--devices " + d + ": this build has no CUDA path (nvcc was not found when it was built)");
#endif
  o.devices = *devices;
  o.name = p.get_or("--name", "");
  auto timeout = p.get_int("--controller-timeout-ms", 30000, 100, 86400000);
  auto parent = p.get_int("--parent-pid", 0, 0, INT32_MAX);
  if (!timeout) return usage_error(cmd, timeout.error().message());
  if (!parent) return usage_error(cmd, parent.error().message());
  o.controller_timeout_ms = *timeout;
  o.parent_pid = pid_t(*parent);
  o.log_level = p.get_or("--log-level", "info");
  o.log_format = p.get_or("--log-format", "plain");
  o.data_host = p.get_or("--data-host", "");
  auto cpu_share = cpu_share_option(p);
  if (!cpu_share) return usage_error(cmd, cpu_share.error().message());
  o.cpu_share = *cpu_share;
  if (auto k = p.get("--server-key")) {
    auto key = wire::resolve_public_key(*k);
    if (!key) return usage_error(cmd, "--server-key: " + key.error().message());
    o.server_public_key = *key;
    o.key_file = p.get_or("--key", "");
    if (o.key_file.empty()) return usage_error(cmd, "--server-key needs --key FILE (this agent's key pair)");
  }
  die_with_parent(o.parent_pid);
  signal(SIGPIPE, SIG_IGN);
  if (auto s = setup_logging(p, "agent " + (o.name.empty() ? std::to_string(getpid()) : o.name)); !s)
    return usage_error(cmd, s.error().message());

  int exit_code = 0;
  {
    zmq::context_t ctx(1);
    EventLoop loop;
    mesh::Agent agent(loop.get(), ctx, o);
    agent.on_exit = [&](int code) {
      exit_code = code;
      loop.stop();
    };
    // Under `salamander run` Ctrl-C reaches the whole process group; the controller stops us then.
    if (o.parent_pid > 0) signal(SIGINT, SIG_IGN);
    loop.on_signals([&](int sig) { agent.stop(sig == SIGINT ? "interrupted" : "terminated"); },
                    o.parent_pid <= 0);
    if (auto s = agent.start(); !s) {
      std::fprintf(stderr, "salamander agent: %s\n", s.error().message().c_str());
      return 1;
    }
    loop.run();
  }
  return exit_code;
}

}  // namespace sal::cli

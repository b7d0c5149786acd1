// cmd_worker.cpp — `salamander worker`: internal; started by an agent, one per device. A cuda:N
// worker trains on GPU N through the GPU backend plugin (runtime/gpu_loader.h), loaded when the
// job arrives; a build without the CUDA path has none, and the controller hears why.
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/job_training.h"
#include "core/heap.h"
#include "runtime/worker.h"
#include "runtime/gpu_loader.h"

namespace sal::cli {

int cmd_worker(const Command& cmd, const Parsed& p) {
  keep_large_blocks();  // slots, frames and migrations reuse their memory (core/heap.h)
  runtime::WorkerOptions o;
  o.agent = p.get_or("--agent", "");
  o.device = p.get_or("--device", "cpu:0");
  auto index = p.get_int("--index", 0, 0, 1 << 20);
  auto node = p.get_int("--node", 0, 0, INT32_MAX);
  auto parent = p.get_int("--parent-pid", 0, 0, INT32_MAX);
  auto hb = p.get_int("--heartbeat-ms", 100, 1, 600000);
  auto pending = p.get_int("--pending-plan-fd", -1, -1, INT32_MAX);
  auto relaunched = p.get_int("--relaunched-at", 0, 0, INT64_MAX);
  for (auto* r : {&index, &node, &parent, &hb, &pending, &relaunched})
    if (!*r) return usage_error(cmd, r->error().message());
  if (o.agent.empty()) return usage_error(cmd, "--agent is required");
  o.index = uint32_t(*index);
  o.node = uint32_t(*node);
  o.parent_pid = pid_t(*parent);
  o.heartbeat_ms = *hb;
  o.pending_plan_fd = int(*pending);
  o.relaunched_at_ns = *relaunched;
  std::string data_host = p.get_or("--data-host", "127.0.0.1");
  std::string device = o.device;
  std::string server_key = p.get_or("--server-key", ""), key_file = p.get_or("--key", "");
  o.load_job = [data_host, device, server_key, key_file](const wire::JobSpec& j) {
    auto s = load_train_spec(j, data_host);
    if (s) {
      s->device = device;
      s->server_key = server_key;
      s->key_file = key_file;
    }
    return s;
  };
  o.cuda = runtime::gpu_factory();
  if (auto s = setup_logging(p, "worker " + std::to_string(o.node) + "." + std::to_string(o.index)); !s)
    return usage_error(cmd, s.error().message());
  return runtime::run_worker(o);
}

}  // namespace sal::cli

// console.cpp — see console.h.
#include "console/console.h"

#include "core/paths.h"
#include "console/repl_server.h"
#include "mesh/endpoint.h"

namespace sal::console {
namespace {

class Console : public mesh::Attachment {
 public:
  explicit Console(std::unique_ptr<ReplServer> server) : server_(std::move(server)) {}
  mesh::AttachedEndpoint endpoint() const override { return {"repl", server_->endpoint()}; }

 private:
  std::unique_ptr<ReplServer> server_;
};

ReplOptions repl_options(const job::ReplConfig& repl, const std::string& run_dir, const mesh::AttachContext& ctx) {
  ReplOptions ro;
  ro.bind = repl.bind;
  ro.budget_ms = repl.budget_ms;
  ro.memory_limit = size_t(repl.memory_mb) << 20;
  ro.max_sessions = size_t(repl.max_sessions);
  if (ctx.curve && !mesh::is_local_endpoint(ro.bind)) {
    ro.curve = ctx.curve;
    ro.allow = ctx.allow;
  }
  if (!run_dir.empty()) ro.audit_path = run_dir + "/audit.log";
  return ro;
}

}  // namespace

mesh::Attach attach(const job::ReplConfig& repl, const std::string& run_dir,
                    std::function<void(lua::ApiRegistry&)> modules) {
  return [repl, run_dir, modules](const mesh::AttachContext& ctx) -> Result<std::unique_ptr<mesh::Attachment>> {
    ReplOptions ro = repl_options(repl, run_dir, ctx);
    ro.modules = modules;
    auto server = std::make_unique<ReplServer>(ctx.loop, ctx.ctx, ctx.controller, std::move(ro));
    SAL_TRY(server->start());
    if (auto dir = runtime_dir(); dir.ok()) (void)write_file(*dir + "/last-repl", server->endpoint() + "\n", 0600);
    return std::unique_ptr<mesh::Attachment>(std::make_unique<Console>(std::move(server)));
  };
}

}  // namespace sal::console

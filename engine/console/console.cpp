// console.cpp — see console.h.
#include "console/console.h"

#include <unistd.h>

#include "core/paths.h"
#include "core/strings.h"
#include "console/repl_server.h"
#include "mesh/endpoint.h"
#include "wire/repl_token.h"

namespace sal::console {
namespace {

class Console : public mesh::Attachment {
 public:
  Console(std::unique_ptr<ReplServer> server, std::string token_file)
      : server_(std::move(server)), token_file_(std::move(token_file)) {}
  ~Console() override {
    if (!token_file_.empty()) ::unlink(token_file_.c_str());
  }
  mesh::AttachedEndpoint endpoint() const override { return {"repl", server_->endpoint()}; }

 private:
  std::unique_ptr<ReplServer> server_;
  std::string token_file_;  // the runtime directory's copy of the token, removed when the job ends
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

// Writes the token where its user alone reads it: <run_dir>/repl.token and the runtime directory's
// file for the endpoint. Returns the runtime file (empty if there is none) and says where both are.
Result<std::string> write_token(const std::string& token, const std::string& run_dir, const std::string& endpoint,
                                std::string& where) {
  std::vector<std::string> files;
  if (!run_dir.empty() && path_exists(run_dir)) {
    SAL_TRY(write_file(run_dir + "/repl.token", token + "\n", 0600));
    files.push_back(run_dir + "/repl.token");
  }
  std::string runtime_file;
  if (auto dir = runtime_dir(); dir.ok()) {
    runtime_file = wire::repl_token_path(*dir, endpoint);
    SAL_TRY(write_file(runtime_file, token + "\n", 0600));
    (void)write_file(*dir + "/last-repl", endpoint + "\n", 0600);
    files.push_back(runtime_file);
  }
  if (files.empty()) return fail("repl: no run directory and no runtime directory to keep the token in");
  where = "it is in " + join(files, " and ") +
          ", readable only by the user who started the job (salamander repl run by that user finds it; "
          "else give --token-file FILE)";
  return runtime_file;
}

}  // namespace

mesh::Attach attach(const job::ReplConfig& repl, const std::string& run_dir,
                    std::function<void(lua::ApiRegistry&)> modules) {
  return [repl, run_dir, modules](const mesh::AttachContext& ctx) -> Result<std::unique_ptr<mesh::Attachment>> {
    ReplOptions ro = repl_options(repl, run_dir, ctx);
    ro.modules = modules;
    if (!ro.curve) {
      auto token = wire::make_repl_token();
      if (!token) return token.error().with_context("repl token");
      ro.token = *token;
    }
    std::string token = ro.token;
    auto server = std::make_unique<ReplServer>(ctx.loop, ctx.ctx, ctx.controller, std::move(ro));
    SAL_TRY(server->start());
    std::string runtime_file;
    if (!token.empty()) {
      std::string where;
      auto written = write_token(token, run_dir, server->endpoint(), where);
      if (!written) return written.error();
      runtime_file = *written;
      server->set_token_where(where);
    } else if (auto dir = runtime_dir(); dir.ok()) {
      (void)write_file(*dir + "/last-repl", server->endpoint() + "\n", 0600);
    }
    return std::unique_ptr<mesh::Attachment>(std::make_unique<Console>(std::move(server), runtime_file));
  };
}

}  // namespace sal::console

// t0215_repl_edges.cpp — a new user's first hour with the REPL, against a live controller: a local
// endpoint admits only the job's token (loopback is reachable by every user of the machine), and
// says where the token is when it refuses; policy.load reads the client's files, whose names its
// errors carry; the client commands (\load, \diff) work in one-shot mode; a node has one name — its
// agent's — in job.nodes(), job.events(), job.kill(), events.csv, the report and its log file.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/paths.h"
#include "support/mesh_harness.h"
#include "support/run_files.h"
#include "wire/repl_token.h"

using namespace sal;
using namespace sal::test;

namespace {

// What a fresh DEALER that skips the client library gets back for `msg`: the ErrorReply's text,
// or "" when the answer is no error.
template <class M>
std::string first_message_refusal(const std::string& ep, const M& msg) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(ep);
  (void)zmq::send_multipart(s, wire::encode(msg));
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(3000)) <= 0) return "no answer";
  wire::Parts reply;
  (void)zmq::recv_multipart(s, std::back_inserter(reply));
  auto env = wire::open(reply);
  if (!env || env->type != wire::MsgType::error) return "";
  auto err = wire::decode<wire::ErrorReply>(*env);
  return err ? err->message : "malformed error";
}

unsigned file_mode(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? unsigned(st.st_mode & 0777) : 0;
}

// This test's own runtime directory, so that other tests' controllers do not replace its last-repl.
std::string private_runtime_dir(const std::string& tag) {
  std::string dir = temp_dir(tag);
  ::setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
  return dir + "/salamander";
}

}  // namespace

TEST_CASE("t0215-repl-token: a local REPL admits only the job's token, kept 0600 where its user alone reads it") {
  std::string runtime = private_runtime_dir("xdg");
  TestMesh m({.agents = 1});
  m.start();  // its own client found the token in the runtime directory
  const std::string run_token = m.dir + "/repl.token";
  const std::string runtime_token = wire::repl_token_path(runtime, m.repl_ep);
  auto token = wire::read_repl_token(run_token);
  REQUIRE(token.ok());
  CHECK(token->size() == 64);
  auto runtime_copy = wire::read_repl_token(runtime_token);
  REQUIRE(runtime_copy.ok());
  CHECK(*runtime_copy == *token);
  CHECK(file_mode(run_token) == 0600);
  CHECK(file_mode(runtime_token) == 0600);
  CHECK(m.eval_json("return 6 * 7") == 42);

  // Without the token — another user, who cannot read either file — nothing is evaluated, and the
  // refusal says where the token is.
  std::string no_session = first_message_refusal(m.repl_ep, wire::ReplEval{1, "job.stop()", wire::ValueFormat::text});
  CHECK(no_session.find("no session") != std::string::npos);
  CHECK(no_session.find(run_token) != std::string::npos);
  CHECK(first_message_refusal(m.repl_ep, wire::ReplHello{"eve", ""}).find("no token given") != std::string::npos);
  CHECK(first_message_refusal(m.repl_ep, wire::ReplHello{"eve", std::string(64, '0')}).find("wrong token") !=
        std::string::npos);
  CHECK(first_message_refusal(m.repl_ep, wire::ReplHello{"me", *token}).empty());

  // The CLI as a user whose runtime directory has no token: exit 2, naming the file.
  std::string elsewhere = temp_dir("xdg-other");
  Proc other = spawn({"/usr/bin/env", "XDG_RUNTIME_DIR=" + elsewhere, bin(), "repl", m.repl_ep, "-e", "return 1"},
                     m.dir + "/other.out");
  CHECK(other.wait(5000) == 2);
  CHECK(other.output().find("no token given") != std::string::npos);
  CHECK(other.output().find(run_token) != std::string::npos);
  // Given the file, the same user gets in; without an endpoint the CLI finds this user's latest job.
  Proc given = spawn({"/usr/bin/env", "XDG_RUNTIME_DIR=" + elsewhere, bin(), "repl", m.repl_ep, "--token-file",
                      run_token, "-e", "return 2"}, m.dir + "/given.out");
  CHECK(given.wait(5000) == 0);
  CHECK(given.output() == "2\n");
  Proc latest = spawn({bin(), "repl", "-e", "return 3"}, m.dir + "/latest.out");
  CHECK(latest.wait(5000) == 0);
  CHECK(latest.output() == "3\n");

  // The runtime directory's copy goes with the job.
  m.eval("job.stop()");
  CHECK(m.controller.wait(15000) >= 0);
  CHECK_FALSE(path_exists(runtime_token));
}

namespace {

// A placement policy as a user writes one (docs/policies.md): round robin.
const char* kMinePolicy = R"(local function decide(ctx)
  local layers = {}
  for l = 1, ctx.layers do
    local nodes, k = {}, 0
    for n = 1, ctx.nodes do nodes[n] = {} end
    for e, r in ipairs(ctx.replicas[l]) do
      for _ = 1, r do
        local n = k % ctx.nodes + 1
        nodes[n][#nodes[n] + 1] = e
        k = k + 1
      end
    end
    layers[l] = nodes
  end
  return { placement = layers }
end
return { api = 1, kind = "placement", name = "mine", doc = "round robin, my way", decide = decide }
)";

// The same with a syntax error on line 5.
const char* kBrokenPolicy = "local function decide(ctx)\n  return { placement = {} }\nend\n\nlocal x = = 1\n"
                            "return { api = 1, kind = 'placement', name = 'broken', doc = 'd', decide = decide }\n";

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("t0216-repl-policy-files: policy.load reads the client's relative path, errors name the file, client commands work with -e") {
  TestMesh m({.agents = 2,
              .model = "model = { layers = 1, d_model = 16, heads = 2, experts = 4, top_k = 2, seq_len = 16 },",
              .extra = "policies = { slots = 2, min_replicas = 2 },"});
  m.start();  // the controller's working directory is the test's, not the user's below
  std::string mine = temp_dir("user-cwd");
  write_text(mine + "/mine.lua", kMinePolicy);
  write_text(mine + "/broken.lua", kBrokenPolicy);
  REQUIRE(::chdir(mine.c_str()) == 0);

  // policy.load with a path relative to where the user's client runs.
  repl::Client user(repl::ClientOptions{m.repl_ep});
  REQUIRE(user.connect().ok());
  auto loaded = user.eval("return policy.load('placement', 'mine.lua').name");
  REQUIRE(loaded.ok());
  CHECK_MESSAGE(loaded->ok, loaded->error);
  CHECK(loaded->value == "\"mine\"");
  auto origin = user.eval("return policy.show('placement').origin");
  CHECK(origin->value == "\"" + mine + "/mine.lua\"");

  // A syntax error in a file: its name and line, whether the controller read it or the client did.
  auto broken = user.eval("return policy.load('placement', 'broken.lua')");
  CHECK_FALSE(broken->ok);
  CHECK(broken->error.find(mine + "/broken.lua:5:") != std::string::npos);
  Proc cli_load = spawn({bin(), "repl", m.repl_ep, "-e", "\\load placement broken.lua"}, mine + "/load.out");
  CHECK(cli_load.wait(5000) == 1);
  CHECK(cli_load.output().find("broken.lua:5:") != std::string::npos);
  CHECK(cli_load.output().find("repl:5") == std::string::npos);

  // \diff and \load in one-shot mode, reading the file where the client runs.
  Proc cli_diff = spawn({bin(), "repl", m.repl_ep, "-e", "\\diff placement mine.lua", "--json"}, mine + "/diff.out");
  CHECK(cli_diff.wait(5000) == 0);
  CHECK(cli_diff.output().find("\"candidate\"") != std::string::npos);
  Proc cli_ok = spawn({bin(), "repl", m.repl_ep, "-e", "\\load placement mine.lua"}, mine + "/ok.out");
  CHECK(cli_ok.wait(5000) == 0);
  CHECK(m.eval_json("return policy.show('placement').origin") == "mine.lua");
  Proc cli_missing = spawn({bin(), "repl", m.repl_ep, "-e", "\\load placement nowhere.lua"}, mine + "/missing.out");
  CHECK(cli_missing.wait(5000) == 1);
  CHECK(cli_missing.output().find("cannot read nowhere.lua") != std::string::npos);
}

TEST_CASE("t0217-node-names: one name per node across the REPL, events.csv, the report and the log files") {
  std::string dir = temp_dir("names");
  Proc run = spawn({bin(), "run", "--steps", "0", "--nodes", "3", "--out", dir + "/out"}, dir + "/run.out");
  std::string ep = run.wait_for_line("repl  ", 10000);
  REQUIRE(!ep.empty());
  repl::Client c(repl::ClientOptions{ep});
  REQUIRE(c.connect().ok());
  auto json = [&](const std::string& chunk) {
    auto r = c.eval(chunk, wire::ValueFormat::json);
    REQUIRE(r.ok());
    REQUIRE_MESSAGE(r->ok, r->error);
    return nlohmann::json::parse(r->value)[0];
  };
  REQUIRE(eventually([&] { return json("return job.status().workers.ready") == 3; }, 15000, 50));

  // Each node's name names its log file; no other name for it exists there.
  std::map<std::string, int64_t> id_of;
  for (auto& n : json("return job.nodes()")) {
    std::string name = n["name"];
    id_of[name] = n["id"];
    CHECK(path_exists(dir + "/out/" + name + ".log"));
  }
  REQUIRE(id_of.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(path_exists(dir + "/out/agent-" + std::to_string(i) + ".log"));

  // A node is acted on by its name, and its events carry it, in job.events() and events.csv alike.
  CHECK(json("return job.kill('node1')") == true);
  REQUIRE(eventually([&] {
    for (auto& e : json("return job.events(200)"))
      if (e["kind"] == "node_dead") return true;
    return false;
  }, 10000, 50));
  for (auto& e : json("return job.events(200)")) {
    if (!e.contains("node")) continue;
    CAPTURE(e.dump());
    REQUIRE(e.contains("name"));
    CHECK(id_of.at(e["name"]) == e["node"]);
    if (e["kind"] == "node_dead") CHECK(e["name"] == "node1");
  }
  auto unknown = c.eval("return job.kill('node9')");
  REQUIRE(unknown.ok());
  CHECK(unknown->error.find("no node named 'node9'") != std::string::npos);
  std::string csv = file_text(dir + "/out/events.csv");
  CHECK(csv.rfind("seq,mono_ns,wall_ms,kind,node,name,epoch,detail\n", 0) == 0);
  CHECK(csv.find(",node_dead," + std::to_string(id_of.at("node1")) + ",node1,") != std::string::npos);

  // The report's events table names the node as the REPL does.
  CHECK(json("return job.stop()") == true);
  CHECK(run.wait(20000) == 0);
  std::string report = file_text(dir + "/out/report.html");
  CHECK(report.find("<td>node_dead</td><td>" + std::to_string(id_of.at("node1")) + " node1</td>") != std::string::npos);
}

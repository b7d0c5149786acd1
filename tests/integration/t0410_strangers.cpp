// t0410_strangers.cpp — nothing reachable is unauthenticated. In a network namespace of its own
// (netns_main.cpp), a secured job listens on a non-loopback address and trains; strangers then
// knock on every endpoint it has — the mesh, the REPL, the data plane's rendezvous store, an
// agent's slice endpoint, an agent's worker endpoint and the Prometheus endpoint — without a key,
// with a key no allowlist names, and with a listed key of the wrong kind (or, over HTTP, without
// the token and with a wrong one). Each is refused (no answer comes back, or 401), the refusal is
// logged once per kind, and the job does not notice: no node joins, none is suspected, no step is
// aborted, steps go on. A job's own node key gets a slice endpoint to answer, but a slot without
// the job's MAC is still refused; and a worker whose data plane would listen beyond loopback
// refuses to, unless the job states a private network.
#include <doctest/doctest.h>

#include <fstream>
#include <thread>

#include "comm/store_protocol.h"
#include "support/netns.h"
#include "support/prom_scrape.h"
#include "support/run_files.h"
#include "wire/codec.h"

using namespace sal;
using namespace sal::test;

namespace {

// Frames as a stranger sends them (wire::Parts and comm::Frames are both lists of zmq messages).
std::vector<std::string> frames_of(std::vector<zmq::message_t> parts) {
  std::vector<std::string> out;
  for (auto& p : parts) out.push_back(p.to_string());
  return out;
}

// Every kind of stranger against one endpoint: none may get an answer.
void check_refused(const std::string& what, const std::string& ep, const Keys& k, const wire::KeyPair& wrong_kind,
                   const std::vector<std::string>& frames) {
  CAPTURE(what);
  Stranger plain(ep), unknown(ep, k.server.public_key, &k.stranger), other_role(ep, k.server.public_key, &wrong_kind);
  for (Stranger* s : {&plain, &unknown, &other_role}) s->send(frames);
  CHECK_FALSE(plain.answered(700));
  CHECK_FALSE(unknown.answered(300));
  CHECK_FALSE(other_role.answered(300));
}

}  // namespace

// The token the job's metrics endpoint asks for (metrics.token), and its certificate (metrics.tls:
// self-signed, for 127.0.0.1 and kNetnsAddress).
constexpr const char* kMetricsToken = "t0410-metrics-token-of-the-job";
const std::string kMetricsCert = SAL_SOURCE_DIR "/tests/support/tls/test-cert.pem";

TEST_CASE("t0410-strangers-refused: without an allowed key every endpoint refuses, and the job does not notice") {
  SecureMesh sm(2);
  std::ofstream(sm.mesh.dir + "/metrics.token") << kMetricsToken << "\n";
  sm.mesh.opts.extra += std::string(" metrics = { bind = 'tcp://") + kNetnsAddress + ":*', token = '" + sm.mesh.dir +
                        "/metrics.token', tls = '" + kMetricsCert + "' },";
  sm.start();
  auto admin = sm.session("admin");
  REQUIRE(eventually([&] { return sm.eval_json(*admin, "return job.status().step").get<int64_t>() > 5; }, 30000, 50));
  std::string store = sm.eval_json(*admin, "return job.training().store");
  REQUIRE(store.find(kNetnsAddress) != std::string::npos);
  auto nodes = sm.eval_json(*admin, "return job.nodes()");
  pid_t worker = nodes[0]["workers"][0]["pid"].get<pid_t>();
  std::string agent_name = nodes[0]["name"];
  std::string local = command_line_value(worker, "--agent");
  REQUIRE(local.rfind("ipc://", 0) == 0);
  size_t events_before = sm.eval_json(*admin, "return job.events(10000)").size();
  int64_t step_before = sm.eval_json(*admin, "return job.status().step");

  auto hello = frames_of(wire::encode(wire::RegisterNode{"eve", "eve-host", 666, {"cpu:0"}, "salamander"}));
  check_refused("mesh", sm.mesh.mesh_ep, sm.keys, sm.keys.operate, hello);
  check_refused("repl", sm.mesh.repl_ep, sm.keys, sm.keys.node, frames_of(wire::encode(wire::ReplHello{"eve"})));
  comm::StoreRequest get{comm::Verb::get, 1, {"plan-1/rank0"}, {}, 100};
  check_refused("store", store, sm.keys, sm.keys.admin, frames_of(comm::encode_request(get)));
  // The store answers the right key (the workers' own): the refusals above are the keys', not a dead port.
  Stranger agent_key(store, sm.keys.server.public_key, &sm.keys.node);
  agent_key.send(frames_of(comm::encode_request(get)));
  CHECK(agent_key.answered(3000));
  // An agent's worker endpoint takes a hello only from the worker process it names.
  Stranger impostor(local);
  impostor.send(frames_of(wire::encode(wire::WorkerHello{0, "cpu:0", uint32_t(worker)})));
  CHECK_FALSE(impostor.answered(700));
  // An agent's slice endpoint (other workers' sparse snapshots in its memory): only the job's node
  // keys get through its ZAP handler; with one, a fetch is answered (the port is alive), and a slot
  // without the job's MAC is refused all the same.
  std::string slices = nodes[0]["slices"];
  REQUIRE(slices.find(kNetnsAddress) != std::string::npos);
  auto fetch = frames_of(wire::encode(wire::SliceFetch{1, 0, {}}));
  check_refused("slices", slices, sm.keys, sm.keys.operate, fetch);
  Stranger insider(slices, sm.keys.node.public_key, &sm.keys.node);
  insider.send(fetch);
  CHECK(insider.answered(3000));
  auto forged = frames_of(wire::encode(wire::SlicePut{}));
  forged.push_back(std::string(32, 'm'));  // a MAC made without the job's key
  insider.send(forged);
  CHECK(eventually([&] {
    for (auto& a : sm.eval_json(*admin, "return job.checkpoint().agents"))
      if (a["refused"].get<int64_t>() > 0) return true;
    return false;
  }, 5000, 50));
  // The metrics endpoint, over HTTPS only: 401 without the token or with a wrong one; the numbers
  // with it; plain HTTP gets no answer.
  std::string metrics = sm.mesh.controller.wait_for_line("metrics ", 1000);
  REQUIRE(metrics.rfind(std::string("https://") + kNetnsAddress, 0) == 0);
  auto no_token = http_get(metrics, 3000, "", kMetricsCert);
  REQUIRE_FALSE(no_token.ok());
  CHECK(no_token.error().message().find("401") != std::string::npos);
  CHECK(http_get(metrics, 3000, "Bearer not-the-token-of-this-job", kMetricsCert).error().message().find("401") !=
        std::string::npos);
  CHECK(http_get(metrics, 3000, "Basic ZXZlOmV2ZQ==", kMetricsCert).error().message().find("401") != std::string::npos);
  CHECK_FALSE(http_get("http://" + metrics.substr(8), 2000, std::string("Bearer ") + kMetricsToken).ok());
  auto with_token = scrape(metrics, 3000, std::string("Bearer ") + kMetricsToken, kMetricsCert);
  REQUIRE_MESSAGE(with_token.ok(), with_token.error().message());
  CHECK(with_token->value("salamander_live_workers").value_or(0) == 2);
  // A stranger with a REPL client: no session.
  repl::Client eve(repl::ClientOptions{sm.mesh.repl_ep, sm.keys.server.public_key, sm.keys.file("stranger"), 700});
  CHECK_FALSE(eve.connect().ok());

  // The job did not notice.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  CHECK(sm.eval_json(*admin, "return job.status().step").get<int64_t>() > step_before);
  auto status = sm.eval_json(*admin, "return job.status()");
  CHECK(status["nodes"]["alive"] == 2);
  CHECK(status["workers"]["ready"] == 2);
  auto events = sm.eval_json(*admin, "return job.events(10000)");
  for (size_t i = events_before; i < events.size(); ++i) {
    std::string kind = events[i]["kind"];
    INFO(events[i].dump());
    CHECK(kind != "node_joined");
    CHECK(kind != "node_dead");  // (a node_suspect of 150 ms can come from a loaded machine alone)
    CHECK(kind != "step_aborted");
    CHECK(kind != "plan_failed");
  }
  // Refused, and said so once per kind (not once per attempt).
  std::string log = sm.mesh.controller.output();
  CHECK(log.find("auth: refused") != std::string::npos);
  CHECK(log.find("key not in allowlist") != std::string::npos);
  CHECK(log.find("not allowed on domain salamander-store") != std::string::npos);
  CHECK(occurrences(log, "on salamander-mesh: key not in allowlist") == 1);
  CHECK(file_text(sm.mesh.dir + "/" + agent_name + ".out").find("which is not that worker") != std::string::npos);
  CHECK(file_text(sm.mesh.dir + "/" + agent_name + ".out").find("on salamander-slices") != std::string::npos);
  CHECK(file_text(sm.mesh.dir + "/" + agent_name + ".out").find("MAC") != std::string::npos);
}

TEST_CASE("t0410-data-plane-refused: without security.private_network no worker listens beyond loopback") {
  SecureMesh sm(1, 1000000, false);
  sm.start(false);
  // The worker refuses the job the controller sends it, saying why, and the job stops there: no
  // step was ever taken, nothing listened for the data plane beyond loopback.
  CHECK(sm.mesh.controller.wait(20000) == 1);
  std::string out = sm.mesh.controller.output();
  INFO(out);
  CHECK(out.find("no worker could start") != std::string::npos);
  CHECK(out.find(std::string("--data-host ") + kNetnsAddress +
                 " is reachable from other hosts, and the data plane (Gloo's TCP pairs) is not authenticated") !=
        std::string::npos);
  CHECK(out.find("security = { private_network = true }") != std::string::npos);
  CHECK(out.find("0 steps committed") != std::string::npos);
}

// t0720_floods.cpp — floods: 10 000 malformed frames a second for 10 s on each endpoint at once (the
// mesh, the REPL, the rendezvous store and an agent's worker endpoint), 1 000 REPL connections
// opened and dropped, and a REPL client that never reads its replies. The job trains on, no node is
// lost and no step aborted, the processes' memory stays bounded, and each log says so once per kind
// of bad input, not once per frame.
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include <zmq_addon.hpp>

#include "support/mesh_harness.h"
#include "wire/repl_token.h"
#include "support/run_files.h"
#include "wire/codec.h"

using namespace sal;
using namespace sal::test;

namespace {

// Resident memory of a process, in MiB.
double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  return -1;
}

// Sends `per_second` malformed messages a second to `ep` for `seconds`: random bytes, one to three
// frames, a valid header now and then so the body decoder is reached too. Never reads an answer.
void flood(const std::string& ep, int per_second, int seconds, std::atomic<uint64_t>& sent) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 100000);
  s.connect(ep);
  std::mt19937 rng(std::hash<std::string>()(ep));
  auto next = std::chrono::steady_clock::now();
  auto end = next + std::chrono::seconds(seconds);
  const int batch = per_second / 100;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < batch; ++i) {
      std::vector<zmq::message_t> parts;
      int frames = 1 + int(rng() % 3);
      for (int f = 0; f < frames; ++f) {
        std::string bytes(1 + rng() % 48, '\0');
        for (auto& b : bytes) b = char(rng());
        if (f == 0 && rng() % 4 == 0) bytes = wire::header_frame(wire::MsgType::heartbeat).to_string();
        parts.emplace_back(bytes.data(), bytes.size());
      }
      if (zmq::send_multipart(s, parts, zmq::send_flags::dontwait)) ++sent;
    }
    next += std::chrono::milliseconds(10);
    std::this_thread::sleep_until(next);
  }
}

struct Health {
  int64_t step = 0;
  double at_ms = 0;
};

Health health(TestMesh& m) { return {m.status()["step"].get<int64_t>(), now_ms()}; }

double rate(const Health& a, const Health& b) { return double(b.step - a.step) / ((b.at_ms - a.at_ms) / 1000); }

void check_job_did_not_notice(TestMesh& m, size_t events_before) {
  auto s = m.status();
  CHECK(s["nodes"]["alive"] == m.opts.agents);
  CHECK(s["workers"]["ready"] == m.opts.agents);
  auto events = m.eval_json("return job.events(100000)");
  for (size_t i = events_before; i < events.size(); ++i) {
    INFO(events[i].dump());
    CHECK(events[i]["kind"] != "node_dead");
    CHECK(events[i]["kind"] != "step_aborted");
  }
}

MeshOptions flooded() {
  MeshOptions o;
  o.agents = 2;
  o.steps = 1000000;
  o.log_level = "info";
  return o;
}

}  // namespace

TEST_CASE("t0720-malformed-floods: 10 000 bad frames a second on every endpoint for 10 s") {
  TestMesh m(flooded());
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 5; }, 30000, 50));
  std::string store = m.eval_json("return job.training().store");
  auto nodes = m.eval_json("return job.nodes()");
  std::string local = command_line_value(nodes[0]["workers"][0]["pid"].get<pid_t>(), "--agent");
  REQUIRE(!local.empty());
  pid_t agent = nodes[0]["pid"].get<pid_t>();
  size_t events_before = m.eval_json("return job.events(100000)").size();
  double controller_before = rss_mib(m.controller.pid()), agent_before = rss_mib(agent);
  Health h0 = health(m);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Health h1 = health(m);

  std::atomic<uint64_t> sent{0};
  std::vector<std::thread> floods;
  for (const std::string& ep : {m.mesh_ep, m.repl_ep, store, local})
    floods.emplace_back([&, ep] { flood(ep, 10000, 10, sent); });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Health h2 = health(m);
  for (auto& t : floods) t.join();
  Health h3 = health(m);

  double before = rate(h0, h1), during = rate(h2, h3);
  double controller_after = rss_mib(m.controller.pid()), agent_after = rss_mib(agent);
  MESSAGE("sent " << sent.load() << " malformed messages; steps/s " << before << " before, " << during
                  << " during; controller RSS " << controller_before << " -> " << controller_after << " MiB, agent "
                  << agent_before << " -> " << agent_after << " MiB");
  CHECK(sent.load() > 300000);
  CHECK(during > 0.25 * before);  // a shared 2-core machine also runs the four flooders
  CHECK(controller_after - controller_before < 64);
  CHECK(agent_after - agent_before < 64);
  check_job_did_not_notice(m, events_before);
  // Once per kind, not per frame (a kind may be logged again after its 10 s of quiet).
  std::string controller_log = m.controller.output();
  CHECK(occurrences(controller_log, "mesh: rejected message") <= 4);
  CHECK(occurrences(controller_log, "repl: rejected message") <= 4);
  CHECK(occurrences(controller_log, "store: bad request") <= 8);
  CHECK(occurrences(controller_log, "mesh: rejected message") >= 1);
  CHECK(occurrences(controller_log, "repl: rejected message") >= 1);
  std::string agent_log = file_text(m.dir + "/" + nodes[0]["name"].get<std::string>() + ".out");
  CHECK(occurrences(agent_log, "worker endpoint: dropped") <= 6);
  CHECK(occurrences(agent_log, "worker endpoint: dropped") >= 1);
}

TEST_CASE("t0721-repl-connection-floods: 1 000 sessions opened and dropped, and a client that never reads") {
  TestMesh m(flooded());
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 5; }, 30000, 50));
  size_t events_before = m.eval_json("return job.events(100000)").size();
  double rss_before = rss_mib(m.controller.pid());
  Health h0 = health(m);
  for (int i = 0; i < 1000; ++i) {
    repl::Client c(repl::ClientOptions{m.repl_ep, "", "", 2000});
    if (i % 2 == 0) REQUIRE(c.connect().ok());  // a session each; the others only connect and go
  }
  double rss_sessions = rss_mib(m.controller.pid());

  // A client that asks for 200 KB answers as fast as it can and never reads one of them.
  zmq::context_t ctx(1);
  zmq::socket_t deaf(ctx, zmq::socket_type::dealer);
  deaf.set(zmq::sockopt::linger, 0);
  deaf.connect(m.repl_ep);
  (void)zmq::send_multipart(deaf, wire::encode(wire::ReplHello{"deaf", wire::find_repl_token(m.repl_ep)}));
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  uint64_t asked = 0;
  while (std::chrono::steady_clock::now() < end) {
    auto parts = wire::encode(wire::ReplEval{++asked, "return ('x'):rep(200000)", wire::ValueFormat::text});
    (void)zmq::send_multipart(deaf, parts, zmq::send_flags::dontwait);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double rss_deaf = rss_mib(m.controller.pid());
  Health h1 = health(m);
  MESSAGE("controller RSS " << rss_before << " MiB, after 1000 connections " << rss_sessions
                            << " MiB, after a deaf client asked " << asked << " times " << rss_deaf << " MiB; "
                            << h1.step - h0.step << " steps meanwhile");
  CHECK(rss_sessions - rss_before < 64);
  CHECK(rss_deaf - rss_before < 96);
  CHECK(h1.step > h0.step + 10);
  CHECK(m.eval_json("return 6 * 7") == 42);  // another session is answered
  check_job_did_not_notice(m, events_before);
  std::string log = m.controller.output();
  CHECK(occurrences(log, "repl: session") < 10);  // sessions come and go at debug level
}

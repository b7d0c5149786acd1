// t0400_curve.cpp — endpoints reachable from other hosts: refused without CURVE; with CURVE only
// allowlisted keys get in, each on its own domain (agents on the mesh, operators on the REPL), and
// a session's role decides which functions it sees.
#include <doctest/doctest.h>

#include <fstream>
#include <thread>

#include "support/mesh_harness.h"
#include "wire/curve.h"

using namespace sal;
using namespace sal::test;

TEST_CASE("t0400-curve-required: binding beyond loopback without keys refuses to start, saying why") {
  TestMesh m({.agents = 0});
  std::ofstream job(m.dir + "/open.lua");
  job << "return { mesh = { bind = 'tcp://0.0.0.0:*' } }\n";
  job.close();
  Proc c = spawn({bin(), "controller", m.dir + "/open.lua"}, m.dir + "/c.out");
  CHECK(c.wait(5000) == 1);
  CHECK(c.output().find("mesh.bind = tcp://0.0.0.0:* is reachable from other hosts; refusing to start without CURVE") !=
        std::string::npos);
}

TEST_CASE("t0401-curve: only allowlisted keys get in, on their own domain, with their role") {
  std::string d = temp_dir("curve");
  auto server = wire::generate_key_files(d + "/server");
  auto agent = wire::generate_key_files(d + "/agent");
  auto op = wire::generate_key_files(d + "/op");
  auto obs = wire::generate_key_files(d + "/obs");
  auto stranger = wire::generate_key_files(d + "/stranger");
  REQUIRE((server.ok() && agent.ok() && op.ok() && obs.ok() && stranger.ok()));
  std::ofstream allow(d + "/allow");
  allow << agent->public_key << " node agent-1\n"
        << op->public_key << " operate alice\n"
        << obs->public_key << " observe bob\n";
  allow.close();
  TestMesh m({.agents = 0, .mesh_bind = "tcp://0.0.0.0:*", .repl_bind = "tcp://0.0.0.0:*",
              .extra = "security = { server_key = '" + d + "/server.key', allow = '" + d + "/allow' },"});
  m.controller = spawn({bin(), "controller", (m.start_job(), m.dir + "/job.lua"), "--log-level", "debug"},
                       m.dir + "/controller.out");
  std::string mesh = m.controller.wait_for_line("mesh ", 5000), repl_ep = m.controller.wait_for_line("repl ", 5000);
  REQUIRE(!repl_ep.empty());
  auto local = [](std::string ep) { return "tcp://127.0.0.1:" + ep.substr(ep.rfind(':') + 1); };

  // An operator with the right key: role operate sees job.kill.
  repl::Client alice({local(repl_ep), server->public_key, d + "/op.key", 2000});
  auto w = alice.connect();
  REQUIRE_MESSAGE(w.ok(), w.error().message());
  CHECK(w->role == "operate");
  CHECK(alice.eval("return type(job.kill)")->value == "\"function\"");
  // An observer: job.kill is refused, naming the role it needs.
  repl::Client bob({local(repl_ep), server->public_key, d + "/obs.key", 2000});
  REQUIRE(bob.connect().ok());
  auto refused = bob.eval("return job.kill(1)");
  REQUIRE(refused.ok());
  CHECK(refused->error.find("job.kill needs role operate; bob (observe, REPL session") != std::string::npos);
  // A stranger, and an agent key on the REPL domain: refused (no answer).
  repl::Client eve({local(repl_ep), server->public_key, d + "/stranger.key", 700});
  CHECK_FALSE(eve.connect().ok());
  repl::Client agent_on_repl({local(repl_ep), server->public_key, d + "/agent.key", 700});
  CHECK_FALSE(agent_on_repl.connect().ok());

  // The agent key joins the mesh; the operator's key may not.
  Proc a = spawn({bin(), "agent", "--controller", local(mesh), "--server-key", d + "/server.pub", "--key",
                  d + "/agent.key", "--name", "secure"}, m.dir + "/a.out");
  CHECK(eventually([&] { return alice.eval("return job.status().workers.ready")->value == "1"; }, 5000, 20));
  Proc intruder = spawn({bin(), "agent", "--controller", local(mesh), "--server-key", d + "/server.pub", "--key",
                         d + "/op.key", "--name", "intruder"}, m.dir + "/i.out");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(alice.eval("return #job.nodes()")->value == "1");
  std::string log = m.controller.output();
  CHECK(log.find("auth: refused") != std::string::npos);
  CHECK(log.find("not allowed on domain salamander-repl") != std::string::npos);
  CHECK(log.find("not allowed on domain salamander-mesh") != std::string::npos);
  // An agent without keys cannot even try against a non-local controller address.
  Proc plain = spawn({bin(), "agent", "--controller", "tcp://10.255.255.1:9"}, m.dir + "/p.out");
  CHECK(plain.wait(3000) == 1);
  CHECK(plain.output().find("CURVE is required") != std::string::npos);
}

// t0411_roles.cpp — roles that mean something: observe reads; operate drills, kills, drains,
// rebalances, asks policies what they would decide and runs simulations; admin loads, reloads and
// rolls back policies and stops the job. Every REPL function is called by a CURVE session of every
// role (on the namespace's non-loopback address): a role below the function's gets an error naming
// both, a role at or above it gets the function (its own answer or its own error), and the audit
// log names who called what. The table must cover every function the controller registers.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/netns.h"

using namespace sal;
using namespace sal::test;

namespace {

struct Call {
  const char* fn;    // as help() lists it
  const char* code;  // a call that does no harm (bad ids, missing files) where the function acts
  const char* role;  // the least role that may call it
};

const Call kMatrix[] = {
    {"job.status", "job.status()", "observe"},
    {"job.nodes", "job.nodes()", "observe"},
    {"job.events", "job.events(1)", "observe"},
    {"job.metrics", "job.metrics(1)", "observe"},
    {"job.loads", "job.loads()", "observe"},
    {"job.health", "job.health()", "observe"},
    {"job.training", "job.training()", "observe"},
    {"job.checkpoint", "job.checkpoint()", "observe"},
    {"job.stacks", "job.stacks()", "observe"},
    {"job.plan", "job.plan()", "observe"},
    {"drill.status", "drill.status()", "observe"},
    {"policy.list", "policy.list()", "observe"},
    {"policy.show", "policy.show('placement')", "observe"},
    {"policy.frontier", "policy.frontier()", "observe"},
    {"sim.status", "sim.status()", "observe"},
    {"sim.list", "sim.list()", "observe"},
    {"sim.result", "sim.result(999)", "observe"},
    {"sim.table", "sim.table(999)", "observe"},
    {"job.kill", "job.kill(999)", "operate"},
    {"job.drain", "job.drain(999)", "operate"},
    {"job.rebalance", "job.rebalance()", "operate"},
    {"drill.start", "drill.start('/nonexistent/drill.lua')", "operate"},
    {"sim.run", "sim.run('/nonexistent/scenario.lua')", "operate"},
    {"sim.cancel", "sim.cancel(999)", "operate"},
    {"policy.decide", "policy.decide('placement')", "operate"},
    {"policy.diff", "policy.diff('placement', 'spread')", "operate"},
    {"policy.load", "policy.load('placement', 'no-such-policy')", "admin"},
    {"policy.reload", "policy.reload('redundancy')", "admin"},
    {"policy.rollback", "policy.rollback('checkpoint')", "admin"},
    {"job.stop", "job.stop()", "admin"},  // last: it ends the job
};

int rank_of(const std::string& role) { return role == "observe" ? 0 : role == "operate" ? 1 : 2; }

// The functions help() lists for a session (every one, for admin).
std::set<std::string> listed(repl::Client& c) {
  auto r = c.eval("help()");
  REQUIRE(r.ok());
  std::set<std::string> out;
  std::regex fn(R"(^  ([a-z]+\.[a-z_]+)\()");
  std::istringstream lines(r->output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, fn)) out.insert(m[1]);
  }
  return out;
}

}  // namespace

TEST_CASE("t0411-roles: every function, by every role: allowed from its role up, refused below, audited") {
  SecureMesh sm(1);
  sm.start();
  std::map<std::string, std::unique_ptr<repl::Client>> sessions;
  for (const char* role : {"observe", "operate", "admin"}) sessions[role] = sm.session(role);

  std::set<std::string> covered;
  for (const auto& c : kMatrix) covered.insert(c.fn);
  const std::set<std::string> all = listed(*sessions["admin"]);
  std::string missing;  // a new function needs a row here
  for (const auto& f : all)
    if (!covered.count(f)) missing += " " + f + " (no row)";
  for (const auto& f : covered)
    if (!all.count(f)) missing += " " + f + " (not listed)";
  CHECK_MESSAGE(missing.empty(), missing);

  for (const auto& c : kMatrix) {
    for (const char* role : {"observe", "operate", "admin"}) {
      std::string call = c.code, who = role;
      CAPTURE(call);
      CAPTURE(who);
      auto r = sessions[role]->eval(std::string("return ") + c.code);
      REQUIRE(r.ok());
      bool refused = !r->ok && r->error.find(std::string(c.fn) + " needs role") != std::string::npos;
      if (rank_of(role) < rank_of(c.role)) {
        CHECK(refused);
        CHECK(r->error.find(std::string(c.fn) + " needs role " + c.role) != std::string::npos);
        CHECK(r->error.find("has role " + std::string(role)) != std::string::npos);
      } else {
        CHECK_FALSE(refused);
      }
      if (std::string(c.fn) == "job.stop" && std::string(role) == "admin") break;
    }
  }

  // The audit log: who called what, and what was refused.
  std::ifstream in(sm.mesh.dir + "/audit.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string audit = ss.str();
  CHECK(audit.find("otto (operate, REPL session") != std::string::npos);
  CHECK(std::regex_search(audit, std::regex(R"re(otto \(operate, REPL session \d+\) calls job\.kill\(999\))re")));
  CHECK(std::regex_search(audit, std::regex(R"re(ada \(admin, REPL session \d+\) calls job\.stop\(\))re")));
  CHECK(std::regex_search(audit, std::regex(R"re(ada \(admin, REPL session \d+\) calls policy\.load\("placement", "no-such-policy"\))re")));
  CHECK(std::regex_search(audit, std::regex(R"re(olga \(observe\) eval "return job\.kill\(999\)" -> error: .*job\.kill needs role operate)re")));
  // And the stop names its author in the job's events.
  bool stop_named = false;
  REQUIRE(eventually([&] { return !sm.mesh.controller.running(); }, 15000, 50));
  std::ifstream ev(sm.mesh.dir + "/events.csv");
  for (std::string line; std::getline(ev, line);)
    if (line.find("stop_requested") != std::string::npos && line.find("job.stop() by ada (admin") != std::string::npos)
      stop_named = true;
  CHECK(stop_named);
}

// t0700_no_stall.cpp — no script can stall the job. While 4 workers train, a REPL session runs a
// pattern that LuaJIT's own matcher would take hours over, a gsub and a table.sort with a comparator
// as long: training keeps committing steps at its usual rate, heartbeats go on, another session is
// answered at once, the chunk gets an error naming its budget within budget + 1 s, and the session's
// next line works with its state intact. A placement policy whose decide() does the same falls back
// to the floor, the event says why, and training goes on.
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr int kBudgetMs = 1000;

// A mesh of 4 workers training a tiny model for as long as the test needs.
MeshOptions training(const std::string& extra = "") {
  MeshOptions o;
  o.agents = 4;
  o.steps = 1000000;
  o.repl_budget_ms = kBudgetMs;
  // no sparse snapshots: the steps/s compared are the REPL's effect alone (the slots' copies and
  // puts share this machine's two cores with the agents that hold them)
  o.train = "batch = 8, peer_copies = 0";
  o.extra = extra;
  return o;
}

int64_t committed(repl::Client& c) {
  auto r = c.eval("return job.status().step", wire::ValueFormat::json);
  REQUIRE(r.ok());
  REQUIRE(r->ok);
  return nlohmann::json::parse(r->value)[0].get<int64_t>();
}

struct Observed {
  double rate_before = 0;     // steps per second in the 2 s before the chunk
  double rate_during = 0;     // while it ran
  double rate_after = 0;      // in the 1 s after it
  double worst_answer_ms = 0; // the slowest answer another session got meanwhile
  int answers = 0;
  // Training's usual rate: the mean of the rates before and after the chunk. This machine's speed
  // drifts by a fifth within seconds (in one run, 153 steps/s before a gsub and 125 after it), and
  // a chunk that slowed training slows the rate during it alone.
  double usual_rate() const { return (rate_before + rate_after) / 2; }
};

// Steps per second over the next `ms` milliseconds, as `client` sees them committed.
double rate_over(repl::Client& client, int ms) {
  int64_t s0 = committed(client);
  double t0 = now_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return double(committed(client) - s0) / ((now_ms() - t0) / 1000);
}

// Runs `chunk` in the mesh's session while a second session polls the committed step every 100 ms.
Observed run_beside_training(TestMesh& m, const std::string& chunk, wire::ReplResult& result, double& took_ms) {
  repl::Client other(repl::ClientOptions{m.repl_ep});
  REQUIRE(other.connect().ok());
  Observed o;
  o.rate_before = rate_over(other, 2000);

  std::atomic<bool> done{false};
  int64_t first = -1, last = -1;
  double first_ms = 0, last_ms = 0;
  std::thread poller([&] {
    while (!done) {
      double a = now_ms();
      int64_t s = committed(other);
      double b = now_ms();
      o.worst_answer_ms = std::max(o.worst_answer_ms, b - a);
      ++o.answers;
      if (first < 0) first = s, first_ms = b;
      last = s, last_ms = b;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  double c0 = now_ms();
  result = m.eval(chunk);
  took_ms = now_ms() - c0;
  done = true;
  poller.join();
  o.rate_during = last_ms > first_ms ? double(last - first) / ((last_ms - first_ms) / 1000) : 0;
  o.rate_after = rate_over(other, 1000);
  return o;
}

void check_runaway_stopped(TestMesh& m, const std::string& what, const std::string& chunk) {
  CAPTURE(what);
  REQUIRE(m.eval("kept = 'still here'").ok);
  wire::ReplResult r;
  double took = 0;
  Observed o = run_beside_training(m, chunk, r, took);
  MESSAGE(what << ": stopped after " << took << " ms; steps/s before " << o.rate_before << ", during "
               << o.rate_during << ", after " << o.rate_after << "; another session: " << o.answers
               << " answers, slowest " << o.worst_answer_ms << " ms");
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("repl.budget_ms (1000 ms) exceeded") != std::string::npos);
  CHECK(took >= kBudgetMs - 50);
  CHECK(took < kBudgetMs + 1000);
  // Training went on at its usual rate (half of it at least, on a shared machine), and the other
  // session was answered throughout.
  CHECK(o.rate_before > 5);
  CHECK(o.rate_during >= 0.5 * o.usual_rate());
  CHECK(o.answers >= 5);
  CHECK(o.worst_answer_ms < 500);
  // The session's next line works, and its state is intact.
  CHECK(m.eval_json("return kept") == "still here");
}

// No node was lost and none is suspect now: heartbeats kept arriving. (A brief node_suspect — 150 ms
// without a heartbeat, resolved at the next — can come from a loaded shared machine alone; it is
// counted, not failed.)
void check_heartbeats(TestMesh& m) {
  auto s = m.status();
  CHECK(s["nodes"]["alive"] == 4);
  CHECK(s["nodes"]["suspect"] == 0);
  int suspects = 0;
  for (auto& e : m.eval_json("return job.events(1000)")) {
    CHECK_MESSAGE(e["kind"] != "node_dead", e.dump());
    CHECK_MESSAGE(e["kind"] != "step_aborted", e.dump());  // the event says why (a CI run saw one once, unexplained)
    suspects += e["kind"] == "node_suspect";
  }
  MESSAGE(suspects << " brief node_suspect events");
}

}  // namespace

TEST_CASE("t0700-repl-runaway-c-calls: a pattern, a gsub and a sort in C cannot stall training") {
  TestMesh m(training());
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 10; }, 30000, 50));
  check_runaway_stopped(m, "find", "return string.find(('a'):rep(40), ('a?'):rep(40)..('a'):rep(40))");
  check_runaway_stopped(m, "gsub", "return (('a'):rep(40)):gsub(('a?'):rep(40)..('a'):rep(40), 'x')");
  // 2e6 elements for the sort, built in four chunks so that none nears the budget on a busy machine
  for (int part = 0; part < 4; ++part) {
    auto r = m.eval(std::string(part == 0 ? "big = {} " : "") + "for i = " + std::to_string(part * 500000 + 1) + ", " +
                    std::to_string((part + 1) * 500000) + " do big[i] = (i * 7919) % 2e6 end");
    INFO(r.error);
    REQUIRE(r.ok);
  }
  check_runaway_stopped(m, "sort", "table.sort(big, function(a, b) return a > b end) table.sort(big, function(a, b) return a < b end)");
  check_heartbeats(m);
}

TEST_CASE("t0701-policy-runaway: a decide() that never ends falls back to the floor, saying why") {
  std::string dir = temp_dir("runaway-policy");
  std::ofstream(dir + "/slow.lua")
      << "return { api = 1, kind = 'placement', name = 'slow', doc = 'runs an exponential pattern',\n"
         "  decide = function(ctx)\n"
         "    string.find(('a'):rep(40), ('a?'):rep(40)..('a'):rep(40))\n"
         "    error('unreachable')\n"
         "  end }\n";
  auto o = training("policies = { placement = '" + dir + "/slow.lua', budget_ms = 500 },");
  o.train = "batch = 8, rebalance_every = 0";  // no re-plan of its own while the slot is questioned
  TestMesh m(o);
  double t0 = now_ms();
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 20; }, 30000, 50));
  MESSAGE("20 steps committed " << now_ms() - t0 << " ms after the start");
  bool fell_back = false;
  for (auto& e : m.eval_json("return job.events(1000)")) {
    if (e["kind"] != "policy_fallback") continue;
    std::string d = e["detail"];
    INFO(d);
    CHECK(d.find("slow gen 1") != std::string::npos);
    CHECK(d.find("policy budget exceeded") != std::string::npos);
    CHECK(d.find("decided by floor") != std::string::npos);
    fell_back = true;
  }
  CHECK(fell_back);
  CHECK(m.eval_json("return job.plan().placement_by") == "floor");
  check_heartbeats(m);
  // A question to the slot runs the same code off the loop: it answers with the floor, and the
  // slot counts nothing for it.
  auto before = m.eval_json("return policy.show('placement')");
  auto d = m.eval_json("return policy.decide('placement')");
  CHECK(d["by"] == "floor");
  CHECK(d["problem"].get<std::string>().find("policy budget exceeded") != std::string::npos);
  auto after = m.eval_json("return policy.show('placement')");
  CHECK(after["decisions"] == before["decisions"]);
  CHECK(after["errors"] == before["errors"]);
  CHECK(after["floor_decisions"] == before["floor_decisions"]);
}

TEST_CASE("t0702-drill-and-job-file-runaways: a drill or a job file that never ends is stopped at its budget") {
  TestMesh m(training());
  m.start();
  std::ofstream(m.dir + "/slow_drill.lua") << "string.find(('a'):rep(40), ('a?'):rep(40)..('a'):rep(40))\n"
                                              "kill{ node = 0, at_s = 1 }\n";
  double t0 = now_ms();
  auto r = m.eval("return drill.start('" + m.dir + "/slow_drill.lua')");
  double took = now_ms() - t0;
  MESSAGE("drill.start of a runaway script answered after " << took << " ms");
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("drill script budget exceeded") != std::string::npos);
  CHECK(took < 2000 + 1000);
  check_heartbeats(m);  // the drill was read on the loop, which kept serving the mesh meanwhile

  std::ofstream(m.dir + "/slow_job.lua") << "local n = string.find(('a'):rep(40), ('a?'):rep(40)..('a'):rep(40))\n"
                                            "return { name = 'slow' }\n";
  Proc c = spawn({bin(), "controller", m.dir + "/slow_job.lua"}, m.dir + "/slow_job.out");
  CHECK(c.wait(5000) == 1);
  CHECK(c.output().find("job file budget exceeded") != std::string::npos);
}

namespace {

// One of issue 34's inputs and what it must end with.
struct IssueInput {
  const char* what;
  std::string chunk;
  const char* error;      // the error it must end with
  int64_t budget_ms;      // the budget that bounds it
};

// The controller's memory for the input: resident before, and the peak after.
struct Memory {
  int64_t rss_before_kb = 0, peak_after_kb = 0;
};

void check_issue_input(TestMesh& m, const IssueInput& in, int64_t cap_mb) {
  std::string what = in.what;
  CAPTURE(what);
  Memory mem;
  mem.rss_before_kb = status_kb(m.controller.pid(), "VmRSS");
  int64_t step_before = m.status()["step"].get<int64_t>();
  wire::ReplResult r;
  double took = 0;
  Observed o = run_beside_training(m, in.chunk, r, took);
  mem.peak_after_kb = status_kb(m.controller.pid(), "VmHWM");
  // The job trains on: its steps advance across the input (measured over the input itself when it
  // lasts long enough for the other session to sample it, else over the next half second).
  bool advanced = eventually([&] { return m.status()["step"].get<int64_t>() > step_before + 2; }, 500, 20);
  double server_ms = double(r.elapsed_us) / 1000;
  MESSAGE(what << ": ended after " << server_ms << " ms (the controller's count; " << took
                  << " ms at the client) with: " << r.error.substr(0, 160) << "; steps/s before " << o.rate_before
                  << ", during " << o.rate_during << ", after " << o.rate_after
                  << "; another session's slowest answer " << o.worst_answer_ms << " ms; controller RSS "
                  << mem.rss_before_kb / 1024 << " MiB before, peak " << mem.peak_after_kb / 1024 << " MiB after");
  CHECK_FALSE(r.ok);
  CHECK(r.error.find(in.error) != std::string::npos);
  CHECK(server_ms < in.budget_ms + 100);
  CHECK(took < in.budget_ms + 1000);  // the round trip on a loaded two-core machine
  CHECK(advanced);
  if (took > 300) CHECK(o.rate_during >= 0.5 * o.usual_rate());
  CHECK(o.worst_answer_ms < 500);
  CHECK(mem.peak_after_kb - mem.rss_before_kb < cap_mb * 1024);
}

}  // namespace

TEST_CASE("t0703-issue-34-inputs: a metatable on a proposal, a long set, a huge shared result end within budget") {
  TestMesh m(training("policies = { budget_ms = 500 },"));
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 10; }, 30000, 50));
  // 1. An allocation policy whose proposal's __index never returns, loaded live: the replay of the
  //    slot's recent decisions reads the proposal raw and refuses its metatable.
  check_issue_input(m,
                    {"policy with a looping __index",
                     "return policy.load('allocation', [[ return { api = 1, kind = 'allocation', name = 'trap', "
                     "doc = 'the policy of issue 34', decide = function(ctx) local r = {} "
                     "for l = 1, ctx.layers do r[l] = {} for e = 1, ctx.experts do r[l][e] = 1 end end "
                     "return setmetatable({ replicas = r }, { __index = function() while true do end end }) end } ]])",
                     "a table with a metatable", 500},
                    64);
  CHECK(m.eval_json("return (policy.show('allocation').live or {}).name") != "trap");
  // 2. A set of 2^18 characters tested against each of 2^18 characters: counted as the work it is.
  check_issue_input(m,
                    {"a long set", "return (('a'):rep(2^18)):find('['..('b'):rep(2^18)..'a]*$')",
                     "repl.budget_ms (1000 ms) exceeded", 1000},
                    64);
  // 3. 64 references to one 64-entry table nested four deep: 16.7 M values once walked.
  check_issue_input(m,
                    {"a shared nesting",
                     "local t = {} for i = 1, 64 do t[i] = i end "
                     "for d = 1, 3 do local u = {} for i = 1, 64 do u[i] = t end t = u end return t",
                     "the REPL's result limit", 1000},
                    64);
  check_heartbeats(m);
}

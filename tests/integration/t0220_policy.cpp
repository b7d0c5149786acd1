// t0220_policy.cpp — policies on a live controller, driven from the REPL as an operator would: the
// job's policies decide a plan for the ready workers; a new placement policy loaded with
// policy.load() takes over at the next plan; broken policies (raising, invalid, looping) are
// refused with the reason and the live generation keeps deciding; rollback is instant; a job
// file naming an unknown policy does not start.
#include <doctest/doctest.h>

#include <fstream>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

TEST_CASE("t0220-policy-live: the plan follows policy.load and broken policies are refused") {
  TestMesh m({.agents = 4,
              .model = "model = { layers = 2, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },",
              .extra = "policies = { slots = 4, min_replicas = 2 },"});
  m.start();
  REQUIRE(eventually([&] { return m.eval_json("local p = job.plan() return p and p.nodes") == 4; }, 3000, 20));
  auto plan = m.eval_json("return job.plan(0)");
  CHECK(plan["placement_by"] == "mro gen 1");
  CHECK(plan["layer"]["placement"].size() == 4);
  int64_t number = plan["number"];

  auto loaded = m.eval_json("return policy.load('placement', 'spread')");
  CHECK(loaded["name"] == "spread");
  CHECK(loaded["generation"] == 2);
  REQUIRE(eventually([&] { return m.eval_json("return job.plan().number").get<int64_t>() > number; }, 3000, 20));
  CHECK(m.eval_json("return job.plan().placement_by") == "spread gen 2");

  for (std::string broken : {"return { api = 1, kind = 'placement', name = 'boom', doc = 'd', decide = function() error('nope') end }",
                             "return { api = 1, kind = 'placement', name = 'bad', doc = 'd', decide = function() return { placement = {} } end }",
                             "return { api = 1, kind = 'placement', name = 'spin', doc = 'd', decide = function() while true do end end }"}) {
    CAPTURE(broken);
    auto r = m.eval("policy.load('placement', [[" + broken + "]])");
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("replay of recent decision") != std::string::npos);
    CHECK(m.eval_json("return policy.show('placement').name") == "spread");
  }
  CHECK(m.status()["nodes"]["alive"] == 4);  // the mesh was served all along

  auto back = m.eval_json("return policy.rollback('placement')");
  CHECK(back["name"] == "mro");
  auto diff = m.eval_json("return policy.diff('placement', 'compact')");
  CHECK(diff["live"] == "mro gen 1");
  auto events = m.eval_json("return job.events(100)");
  int refused = 0, rolled = 0;
  for (auto& e : events) {
    refused += e["kind"] == "policy_refused";
    rolled += e["kind"] == "policy_rollback";
  }
  CHECK(refused == 3);
  CHECK(rolled == 1);
}

TEST_CASE("t0221-policy-job-file: a job naming an unknown policy is refused at start, naming the key") {
  TestMesh m({.agents = 0});
  std::ofstream job(m.dir + "/bad.lua");
  job << "return { policies = { placement = 'mor' } }\n";
  job.close();
  Proc c = spawn({bin(), "controller", m.dir + "/bad.lua"}, m.dir + "/c.out");
  CHECK(c.wait(5000) == 1);
  CHECK(c.output().find("policies.placement: no placement policy named 'mor' (shipped: ") != std::string::npos);
}

// t0220_policy.cpp — policies on a live controller, driven from the REPL as an operator would: the
// job's policies decide a plan for the ready workers (the default placement says what it chose and
// why; policy.frontier() shows the alternatives); a new placement policy loaded with
// policy.load() takes over at the next plan; broken policies (raising, invalid, looping) are
// refused with the reason and the live generation keeps deciding; rollback is instant; the
// checkpoint schedule travels with every plan, decided from measured inputs; a job file naming an
// unknown policy does not start.
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
  CHECK(plan["placement_by"] == "goodput gen 1");
  CHECK(plan["layer"]["placement"].size() == 4);
  int64_t number = plan["number"];
  // the default placement says what it chose and what it turned down (issue 35)
  const auto& choice = plan["placement"];
  REQUIRE(choice.is_object());
  CHECK(choice["point"].is_string());
  CHECK(choice["p"].size() == 3);
  CHECK(choice["p"][0] == 1.0);  // f = 2: any single node loss is survived
  CHECK(choice["goodput"].get<double>() > 0);
  CHECK(choice["failures"]["source"].get<std::string>().find("assumed") == 0);
  CHECK(plan["note"].get<std::string>().find(choice["point"].get<std::string>()) != std::string::npos);
  // the frontier on the live loads, with the plan in force weighed as a candidate
  auto frontier = m.eval_json("return policy.frontier()");
  CHECK(frontier["nodes"] == 4);
  bool in_force = false, chain = false;
  for (const auto& p : frontier["points"]) {
    in_force = in_force || p["name"] == "in force";
    chain = chain || p["name"] == "chain";
    CHECK(p["p"].size() == 3);
    CHECK(p["load_balance"].get<double>() >= 1.0);
  }
  CHECK(in_force);
  CHECK(chain);
  CHECK(frontier["steps"] == 0);  // no step measured (t0503 sees them)

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
  CHECK(back["name"] == "goodput");
  auto diff = m.eval_json("return policy.diff('placement', 'compact')");
  CHECK(diff["live"] == "goodput gen 1");
  auto events = m.eval_json("return job.events(100)");
  int refused = 0, rolled = 0;
  for (auto& e : events) {
    refused += e["kind"] == "policy_refused";
    rolled += e["kind"] == "policy_rollback";
  }
  CHECK(refused == 3);
  CHECK(rolled == 1);
}

TEST_CASE("t0222-checkpoint-schedule-live: every plan carries the checkpoint schedule, decided from measured inputs") {
  TestMesh m({.agents = 4,
              .steps = 1000000000,
              .model = "model = { layers = 2, d_model = 16, heads = 2, experts = 4, top_k = 2, seq_len = 16 },",
              .train = "batch = 8, checkpoint_every = 5, rebalance_every = 0",
              .extra = "policies = { slots = 2, min_replicas = 1, checkpoint = 'moetion' },"});
  m.start();
  REQUIRE(eventually([&] { return m.eval_json("local p = job.plan() return p and p.nodes") == 4; }, 3000, 20));
  auto first = m.eval_json("return job.plan().schedule");
  CHECK(m.eval_json("return job.plan().checkpoint_by") == "moetion gen 1");
  CHECK(first["operators"] == 1 + 2 * (2 + 4));  // the model's units
  CHECK(first["iteration_s"] == 1.0);              // nothing measured before the first plan
  // after steps and a snapshot, a new plan is decided from what was measured
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 12; }, 20000));
  REQUIRE(eventually([&] {
    for (const auto& e : m.eval_json("return job.events(200)"))
      if (e["kind"] == "snapshot_saved") return true;
    return false;
  }, 20000));
  m.eval_json("return job.rebalance()");
  REQUIRE(eventually([&] { return m.eval_json("return job.plan().number").get<int64_t>() > 1; }, 20000));
  auto measured = m.eval_json("return job.plan().schedule");
  CHECK(measured["iteration_s"].get<double>() < 1.0);  // a measured step of this tiny model
  CHECK(measured["bandwidth_Bps"].get<double>() != 16e9);
  size_t listed = 0;
  for (const auto& iteration : measured["slots"]) listed += iteration.size();
  CHECK(listed == 13);  // every operator once in the window
  // another checkpoint policy changes the schedule of the next plan
  int64_t number = m.eval_json("return job.plan().number");  // before the load: its re-plan may be quick
  auto loaded = m.eval_json("return policy.load('checkpoint', 'dense')");
  CHECK(loaded["name"] == "dense");
  REQUIRE(eventually([&] { return m.eval_json("return job.plan().number").get<int64_t>() > number; }, 20000));
  CHECK(m.eval_json("return job.plan().checkpoint_by") == "dense gen 2");
  auto dense = m.eval_json("return job.plan().schedule");
  CHECK(dense["window"] == 1);
  CHECK(dense["slots"][0].size() == 13);
  // the new schedule is put in force, even where the placement stays the same
  REQUIRE(eventually([&] { return m.eval_json("return job.training().plan").get<int64_t>() == m.eval_json("return job.plan().number").get<int64_t>(); }, 20000));
  CHECK(m.status()["steps_aborted"] == 0);
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

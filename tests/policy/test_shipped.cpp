// test_shipped.cpp — the shipped policies: each loads and passes its selftest; on random inputs
// every proposal passes the C++ validators; Lazarus's Eq. 1 fills N·c slots, keeps the floor and
// gives more replicas to more load.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "policy/kinds.h"
#include "policy/policy_set.h"
#include "policy/decide.h"

using namespace sal;
using namespace sal::policy;
using sal::policy::test::decide_valid;

namespace {

std::vector<std::vector<double>> random_loads(std::mt19937& rng, uint32_t layers, uint32_t experts) {
  std::vector<std::vector<double>> out(layers, std::vector<double>(experts));
  std::exponential_distribution<double> exp(1.0);
  for (auto& l : out)
    for (auto& t : l) t = (rng() % 4 == 0) ? 0.0 : std::floor(exp(rng) * 1000);
  return out;
}

}  // namespace

TEST_CASE("every shipped policy loads and passes its own selftest") {
  PolicySet set;
  int checked = 0;
  for (Kind k : kKinds)
    for (const auto& name : set.resolver().shipped(k)) {
      CAPTURE(name);
      auto g = set.check(k, name);
      REQUIRE_MESSAGE(g.ok(), g.error().message());
      CHECK((*g)->has_selftest());
      ++checked;
    }
  CHECK(checked == 16);
}

// scripts/gpu/swap_one.lua (bench.sh's replan step: a re-plan that trades one expert each way) is
// not shipped, but it is a policy the GPU measurements load: its selftest (the trade) and a decide
// on the synthetic context must pass.
TEST_CASE("scripts/gpu/swap_one.lua loads, passes its selftest and decides validly") {
  PolicySet set;
  auto g = set.check(Kind::placement, SAL_SOURCE_DIR "/scripts/gpu/swap_one.lua");
  REQUIRE_MESSAGE(g.ok(), g.error().message());
  CHECK((*g)->has_selftest());
}

TEST_CASE("lazarus: Eq. 1 fills N*c, keeps the floor, and is monotone in load") {
  PolicySet set;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    uint32_t experts = 2 + rng() % 30, nodes = 1 + rng() % 16, slots = 1 + rng() % 8;
    if (nodes * slots < experts) continue;
    uint32_t f = 1 + rng() % 3;
    AllocationInput in{nodes, slots, experts, f, random_loads(rng, 2, experts)};
    auto p = std::get<AllocationProposal>(decide_valid(set, Kind::allocation, "lazarus", in));
    for (size_t l = 0; l < in.loads.size(); ++l) {
      uint64_t sum = 0;
      for (uint32_t e = 0; e < experts; ++e) {
        sum += p.replicas[l][e];
        CHECK(p.replicas[l][e] >= p.floor);
        for (uint32_t o = 0; o < experts; ++o)
          if (in.loads[l][e] > in.loads[l][o]) CHECK(p.replicas[l][e] >= p.replicas[l][o]);
      }
      CHECK(sum == uint64_t(nodes) * slots);
    }
    CHECK(p.floor == std::min<uint32_t>(f, std::max<uint32_t>(1, nodes * slots / experts)));
  }
}

TEST_CASE("every allocation and placement pair gives valid plans on random inputs") {
  PolicySet set;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    uint32_t experts = 2 + rng() % 16, nodes = 2 + rng() % 12, slots = 1 + rng() % 6;
    if (nodes * slots < experts) continue;
    AllocationInput ain{nodes, slots, experts, 2, random_loads(rng, 2, experts)};
    for (std::string alloc : {"lazarus", "uniform", "eplb"}) {
      auto a = std::get<AllocationProposal>(decide_valid(set, Kind::allocation, alloc, ain));
      PlacementInput pin{nodes, slots, experts, a.floor, a.replicas, ain.loads, {}};
      for (std::string place : {"goodput", "stepwise", "mro", "spread", "compact"}) {
        CAPTURE(alloc);
        CAPTURE(place);
        decide_valid(set, Kind::placement, place, pin);
      }
    }
  }
}

TEST_CASE("checkpoint policies cover every operator once on random profiles") {
  PolicySet set;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    CheckpointInput in;
    uint32_t n = 3 + rng() % 40;
    for (uint32_t i = 0; i < n; ++i) {
      double compute = double(100 + rng() % 1000);
      in.operators.push_back({"op" + std::to_string(i), i % 5 == 4 ? "dense" : "expert", 0, int32_t(i),
                              compute * 3, compute, double(rng() % 100)});
    }
    in.iteration_s = 1;
    in.bandwidth_Bps = double(1000 * n + rng() % 20000);
    for (std::string name : {"moetion", "dense", "roundrobin"}) {
      CAPTURE(name);
      decide_valid(set, Kind::checkpoint, name, in);
    }
  }
}

TEST_CASE("redundancy policies are valid after random failures, and SPARe masks more than replication") {
  PolicySet set;
  std::mt19937 rng(3);
  int spare_survived = 0, replication_survived = 0;
  for (int trial = 0; trial < 30; ++trial) {
    RedundancyInput in{31, std::vector<bool>(31, true), 5, false, {}};
    for (int k = 0; k < 6; ++k) in.alive[rng() % 31] = false;
    for (std::string name : {"spare", "replication", "none"}) {
      CAPTURE(name);
      in.redundancy = name == "none" ? 0 : 5;  // `none` is r = 1 by definition
      auto p = std::get<RedundancyProposal>(decide_valid(set, Kind::redundancy, name, in));
      if (name == "spare") spare_survived += !p.wipeout;
      if (name == "replication") replication_survived += !p.wipeout;
    }
  }
  CHECK(spare_survived >= replication_survived);
}

TEST_CASE("after a patch: spare spreads and trains on degraded, a proposal that says neither regroups where a type has one host") {
  PolicySet set;
  RedundancyInput four{4, {true, false, true, true}, 2, false, {}};
  auto replication = std::get<RedundancyProposal>(decide_valid(set, Kind::redundancy, "replication", four));
  CHECK(replication.after_patch == plan::AfterPatch::regroup);  // r = 2: the lost group's types have one host left
  CHECK_FALSE(replication.spread);
  auto spare = std::get<RedundancyProposal>(decide_valid(set, Kind::redundancy, "spare", four));
  CHECK(spare.after_patch == plan::AfterPatch::cheaper);  // spread: every group up computes a part
  CHECK(spare.spread);
  RedundancyInput thirteen{13, std::vector<bool>(13, true), 4, false, {}};
  thirteen.alive[2] = false;
  auto deep = std::get<RedundancyProposal>(decide_valid(set, Kind::redundancy, "spare", thirteen));
  CHECK(deep.after_patch == plan::AfterPatch::cheaper);
  auto blocks = std::get<RedundancyProposal>(decide_valid(set, Kind::redundancy, "replication", RedundancyInput{6, {true, false, true, true, true, true}, 3, false, {}}));
  CHECK(blocks.after_patch == plan::AfterPatch::cheaper);  // replication leaves it out: blocks of 3 keep two
}

TEST_CASE("health policies: lighten gives a slow worker work until it keeps up, ignore keeps lockstep") {
  PolicySet set;
  HealthInput in;
  in.step = 200, in.min_workers = 2;
  for (uint32_t n = 1; n <= 4; ++n) in.workers.push_back({std::to_string(n) + ".0", n, 1.0, 1.0, false, 20, 0, 1});
  in.workers[2].ratio = in.workers[2].lag = 2.5, in.workers[2].slow = true, in.workers[2].since_step = 150;
  in.workers[3].ratio = 1.4;  // slower than the others but not named slow: left alone
  auto lighten = std::get<HealthProposal>(decide_valid(set, Kind::health, "lighten", in));
  CHECK(lighten.shares[2] == doctest::Approx(std::pow(2.5, -0.7)));  // damped: 0.53, not 0.4
  CHECK(lighten.shares[0] == 1);
  CHECK(lighten.shares[3] == 1);
  CHECK(lighten.drain.empty());
  CHECK(lighten.note.find("3.0 at 2.50x, lag 2.50: share 0.53") != std::string::npos);
  auto ignore = std::get<HealthProposal>(decide_valid(set, Kind::health, "ignore", in));
  CHECK(ignore.shares == std::vector<double>{1, 1, 1, 1});
  // the floor policy (any Lua failure) is lockstep too
  auto floor = std::get<HealthProposal>(ops_for(Kind::health).floor(Input(in)));
  CHECK(floor.shares == std::vector<double>{1, 1, 1, 1});
}

TEST_CASE("policies/lib/heap.lua pops by key, then tie, and a broken order fails the check") {
  // A policy whose selftest fills a heap with 500 pseudo-random keys (50 values, so many ties) and
  // checks that they come out by key, ties by the lower tie, then that the heap is empty.
  auto source = [](const std::string& check) {
    return std::string(R"(
local heap = require "heap"
local function selftest(t)
  local h, seed = heap.new(), 1
  for i = 1, 500 do
    seed = (seed * 1103515245 + 12345) % 2147483648
    h:push(seed % 50, i, { seed % 50, i })
  end
  t.eq(h:size(), 500)
  local last
  for _ = 1, 500 do
    local item, key = h:pop()
    t.ok(item ~= nil and key == item[1], "each item comes with its key")
    t.ok(not last or )") + check + R"(, "by key, ties by the lower tie")
    last = item
  end
  t.ok(h:pop() == nil and h:size() == 0, "then empty")
end
local function decide(ctx)
  local replicas = {}
  for l = 1, ctx.layers do
    replicas[l] = {}
    for e = 1, ctx.experts do replicas[l][e] = math.floor(ctx.nodes * ctx.slots / ctx.experts) end
    for e = 1, ctx.nodes * ctx.slots - ctx.experts * replicas[l][1] do replicas[l][e] = replicas[l][e] + 1 end
  end
  return { replicas = replicas }
end
return { api = 1, kind = "allocation", name = "heap_check", doc = "checks policies/lib/heap.lua",
         decide = decide, selftest = selftest }
)";
  };
  PolicySet set;
  auto good = set.check(Kind::allocation, source("item[1] > last[1] or (item[1] == last[1] and item[2] > last[2])"));
  CHECK_MESSAGE(good.ok(), (good.ok() ? "" : good.error().message()));
  // the same check with the ties' order reversed fails: the selftest can tell
  auto reversed =
      set.check(Kind::allocation, source("item[1] > last[1] or (item[1] == last[1] and item[2] < last[2])"));
  CHECK_FALSE(reversed.ok());
}

// test_expert_grads.cpp — expert gradients reduced among their holders only (runtime/expert_grads.h),
// with real worker processes on real Gloo collectives: every replicated expert ends with the sum of
// its holders' gradients, added in ascending rank order, bit-identical on every holder; an expert
// held once keeps its own; which ranks are roots rotates; a rank told it holds an expert it lacks
// gets an error naming the expert.
#include <doctest/doctest.h>

#include "comm/gloo_collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "runtime/expert_grads.h"

using namespace sal;
using namespace sal::runtime;
using sal::test::Report;
using sal::test::Workers;

namespace {

constexpr int kRanks = 4;

model::Dims tiny() {
  model::Dims d;
  d.layers = 2, d.d = 8, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 4;
  return d;
}

// [layer] -> R[expert][rank]: shared four ways, two ways (twice), three ways (twice), and held once.
std::vector<Counts> plan() {
  return {
      {{1, 1, 1, 1}, {0, 1, 0, 2}, {0, 0, 1, 0}, {1, 0, 1, 0}},
      {{0, 0, 0, 1}, {1, 1, 0, 0}, {2, 1, 1, 0}, {0, 1, 1, 1}},
  };
}

// What rank r's gradient of (l, e) holds before the reduction.
float grad_value(int r, int l, int e, size_t j) { return float(r) * 1.5f + float(l * 10 + e) + float(j) * 0.01f; }

std::vector<std::pair<int, int>> held_by(int rank) {
  std::vector<std::pair<int, int>> held;
  const auto p = plan();
  for (size_t l = 0; l < p.size(); ++l)
    for (size_t e = 0; e < p[l].size(); ++e)
      if (p[l][e][size_t(rank)] > 0) held.emplace_back(int(l), int(e));
  return held;
}

std::string reduce_worker(int rank, const std::string& endpoint, bool lie) {
  Report rep;
  zmq::context_t zmq{1};
  comm::StoreClient store(zmq, endpoint);
  comm::GlooOptions o;
  o.rank = rank, o.size = kRanks, o.prefix = lie ? "lie" : "grads", o.connect_timeout_ms = 3000, o.op_timeout_ms = 3000;
  auto c = comm::connect_gloo(o, store);
  if (!c) return "FAIL connect: " + c.error().message() + "\n";
  auto held = held_by(rank);
  if (lie && rank == 3) held.erase(held.begin());  // rank 3 drops layer0.expert0, which the plan gives it
  auto params = model::Params::create(tiny(), 1, held);
  for (auto [l, e] : held) {
    auto& g = params.expert(l, e)->g;
    for (size_t j = 0; j < g.size(); ++j) g[j] = grad_value(rank, l, e, j);
  }
  auto st = reduce_among_holders(**c, rank, shared_experts(plan()), params);
  if (lie) {
    if (rank == 3) rep.check(!st.ok() && st.error().message().find("layer0.expert0") != std::string::npos,
                             "the error names the missing expert: " + (st.ok() ? "none" : st.error().message()));
    return rep.text();
  }
  rep.check(st.ok(), "reduce: " + (st.ok() ? "" : st.error().message()));
  const auto p = plan();
  for (auto [l, e] : held) {
    std::vector<int> holders;
    for (int r = 0; r < kRanks; ++r)
      if (p[size_t(l)][size_t(e)][size_t(r)] > 0) holders.push_back(r);
    const auto& g = params.expert(l, e)->g;
    for (size_t j = 0; j < g.size(); ++j) {
      float want = grad_value(rank, l, e, j);
      if (holders.size() > 1) {
        want = 0;
        for (int r : holders) want += grad_value(r, l, e, j);
      }
      if (g[j] != want) {
        rep.check(false, "layer" + std::to_string(l) + ".expert" + std::to_string(e) + " element " + std::to_string(j) +
                             ": " + std::to_string(g[j]) + " != " + std::to_string(want));
        break;
      }
    }
  }
  return rep.text();
}

void run_workers(bool lie) {
  Workers w(kRanks, [lie](int rank, const std::string& ep) { return reduce_worker(rank, ep, lie); });
  zmq::context_t ctx{1};
  comm::StoreServer server{ctx, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  w.go(*ep);
  auto reports = w.collect(20000);
  for (size_t r = 0; r < reports.size(); ++r) {
    CAPTURE(r);
    CAPTURE(reports[r]);
    if (!lie || r == 3) CHECK(reports[r].rfind("OK\n", 0) == 0);
  }
}

}  // namespace

TEST_CASE("shared experts: only those held by two or more ranks, roots taking turns among the holders") {
  auto shared = shared_experts(plan());
  REQUIRE(shared.size() == 6);  // layer0: e0 e1 e3; layer1: e1 e2 e3
  CHECK(shared[0].layer == 0);
  CHECK(shared[0].expert == 0);
  CHECK(shared[0].holders == std::vector<int>{0, 1, 2, 3});
  CHECK(shared[1].holders == std::vector<int>{1, 3});
  CHECK(shared[2].expert == 3);
  CHECK(shared[3].layer == 1);
  CHECK(shared[3].expert == 1);
  std::vector<int> roots;
  for (const auto& s : shared) {
    CHECK(std::find(s.holders.begin(), s.holders.end(), s.root) != s.holders.end());
    roots.push_back(s.root);
  }
  CHECK(roots == std::vector<int>{0, 3, 0, 1, 1, 3});  // holders[i % h]
}

TEST_CASE("expert gradients: summed among their holders only, in rank order, identical on every holder") {
  run_workers(false);
}

TEST_CASE("expert gradients: a rank that lacks an expert the plan gives it gets an error naming it") {
  run_workers(true);
}

// test_shadow_exchange.cpp — shadowed experts (runtime/shadows.h) through the DistributedExchange,
// three worker processes on real Gloo collectives. One layer's tokens crowd onto two experts: expert
// 0 held by rank 0 alone, expert 1 by ranks 1 and 2. Each rank runs the layer forward and backward
// three times on fresh units: without shadows, with them, and with them and every unit frozen
// (MoEtion's replay: its shadows must compute no weight gradient either). Shadowed, the busiest rank
// computes fewer rows and the ranks as many in all, and the outputs, input gradients and every
// expert's weight gradient (summed over its holders, as the holders' gradient sync sums them) equal a
// single process's LocalExchange over all three ranks' tokens within float reassociation; a source
// that dropped or misplaced its shadows' gradients is off by a large part of them (a misplaced send
// buffer was, before the test caught it).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "comm/collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "model/local_exchange.h"
#include "runtime/distributed_exchange.h"

using namespace sal;
using namespace sal::runtime;
using sal::test::Workers;

namespace shadow_exchange_test {
namespace {

constexpr int kRanks = 3, kTokens = 256, kSeed = 5;

model::Dims dims() {
  model::Dims d;
  d.layers = 1, d.d = 16, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 8, d.vocab = 64;
  return d;
}

// R[e][rank]: expert 0 on rank 0, expert 1 on ranks 1 and 2, expert 2 on rank 2, expert 3 on rank 0.
const std::vector<Counts> kReplicas = {{{1, 0, 0}, {0, 1, 1}, {0, 0, 1}, {1, 0, 0}}};

bool holds(int rank, int e) { return kReplicas[0][size_t(e)][size_t(rank)] > 0; }

// A rank's tokens: rows from its own stream, nearly all routed to experts 0 and 1.
struct Inputs {
  std::vector<float> x, d_out;
  model::Routing r;
};

Inputs inputs(int rank) {
  std::mt19937 rng(uint32_t(100 + rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Inputs in;
  const int D = dims().d;
  in.x.resize(size_t(kTokens) * D);
  in.d_out.resize(size_t(kTokens) * 2 * D);
  for (float& v : in.x) v = u(rng);
  for (float& v : in.d_out) v = u(rng);
  in.r.tokens = kTokens, in.r.k = 2;
  for (int t = 0; t < kTokens; ++t) {
    const bool rare = t % 16 == 0;
    in.r.idx.push_back(rare ? 2 : 0);
    in.r.idx.push_back(rare ? 3 : 1);
  }
  return in;
}

void put(std::string& out, const std::vector<float>& v) {
  const uint64_t n = v.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(reinterpret_cast<const char*>(v.data()), n * sizeof(float));
}

std::vector<float> get(const std::string& in, size_t& at) {
  uint64_t n = 0;
  REQUIRE(at + sizeof n <= in.size());
  std::memcpy(&n, in.data() + at, sizeof n);
  at += sizeof n;
  REQUIRE(at + n * sizeof(float) <= in.size());
  std::vector<float> v(n);
  std::memcpy(v.data(), in.data() + at, n * sizeof(float));
  at += n * sizeof(float);
  return v;
}

struct Pass {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> grads;  // per expert: this rank's gradient (empty: not held)
  int64_t rows = 0;
};

// What a rank sends back for each pass: "OK", then out, dx, rows, and each expert's gradient.
std::string rank_body(int rank, const std::string& endpoint) {
  zmq::context_t zmq{1};
  comm::StoreClient store(zmq, endpoint);
  comm::GlooOptions o;
  o.rank = rank, o.size = kRanks, o.prefix = "shadows", o.connect_timeout_ms = 3000, o.op_timeout_ms = 5000;
  o.verify_counts = true;  // sizes that disagree fail by name instead of hanging
  auto c = comm::connect_gloo(o, store);
  if (!c) return "FAIL connect: " + c.error().message();
  std::vector<std::pair<int, int>> held;
  for (int e = 0; e < 4; ++e)
    if (holds(rank, e)) held.emplace_back(0, e);
  const Inputs in = inputs(rank);
  std::string out = "OK";
  for (int pass = 0; pass < 3; ++pass) {  // plain, shadowed, shadowed with every unit frozen
    auto params = model::Params::create(dims(), kSeed, held);
    for (auto& [key, u] : params.experts) u.frozen = pass == 2;
    DistributedExchange ex(**c, params, kReplicas);
    ex.shadows = pass > 0;
    std::vector<float> y(in.d_out.size()), dx(in.d_out.size());
    if (auto s = ex.forward(0, in.x.data(), in.r, y.data()); !s) return "FAIL forward: " + s.error().message();
    if (auto s = ex.backward(0, in.d_out.data(), dx.data()); !s) return "FAIL backward: " + s.error().message();
    put(out, y);
    put(out, dx);
    put(out, {float(ex.expert_rows())});
    for (int e = 0; e < 4; ++e) {
      const model::Unit* u = params.expert(0, e);
      put(out, u ? u->g : std::vector<float>{});
    }
  }
  return out;
}

// The largest difference against the largest magnitude of the reference.
double rel_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(ref[i])));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return diff / scale;
}

}  // namespace

TEST_CASE("shadowed experts: each rank computes its own tokens, and the sums are the local exchange's") {
  Workers w(kRanks, rank_body);
  zmq::context_t ctx{1};
  comm::StoreServer server{ctx, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  w.go(*ep);
  auto reports = w.collect(60000);
  std::vector<std::vector<Pass>> passes(kRanks);  // [rank][plain, shadowed, shadowed and frozen]
  for (int r = 0; r < kRanks; ++r) {
    const std::string& rep = reports[size_t(r)];
    REQUIRE_MESSAGE(rep.rfind("OK", 0) == 0, rep);
    size_t at = 2;
    for (int p = 0; p < 3; ++p) {
      Pass pass;
      pass.out = get(rep, at);
      pass.dx = get(rep, at);
      pass.rows = int64_t(get(rep, at).at(0));
      for (int e = 0; e < 4; ++e) pass.grads.push_back(get(rep, at));
      passes[size_t(r)].push_back(std::move(pass));
    }
  }

  // the reference: one process holding every expert, each rank's tokens in turn
  auto all = model::Params::create(dims(), kSeed, model::Params::all_experts(dims()));
  std::vector<Inputs> in;
  for (int r = 0; r < kRanks; ++r) in.push_back(inputs(r));
  for (int r = 0; r < kRanks; ++r) {
    model::LocalExchange local(all);
    std::vector<float> y(in[size_t(r)].d_out.size()), dx(y.size());
    REQUIRE(local.forward(0, in[size_t(r)].x.data(), in[size_t(r)].r, y.data()));
    REQUIRE(local.backward(0, in[size_t(r)].d_out.data(), dx.data()));
    for (int p = 0; p < 3; ++p) {
      CAPTURE(r);
      CAPTURE(p);
      CHECK(rel_diff(passes[size_t(r)][size_t(p)].out, y) < 1e-5);
      CHECK(rel_diff(passes[size_t(r)][size_t(p)].dx, dx) < 1e-5);
    }
  }
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 4; ++e) {
      CAPTURE(p);
      CAPTURE(e);
      std::vector<float> sum(all.expert(0, e)->g.size(), 0.0f);
      for (int r = 0; r < kRanks; ++r) {
        const auto& g = passes[size_t(r)][size_t(p)].grads[size_t(e)];
        CHECK(g.empty() != holds(r, e));
        for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
      }
      CHECK(rel_diff(sum, all.expert(0, e)->g) < 1e-5);
    }
  for (int r = 0; r < kRanks; ++r)  // frozen: no weight gradient anywhere, and none sent for one
    for (const auto& g : passes[size_t(r)][2].grads)
      for (float v : g) CHECK(v == 0.0f);

  // the same rows computed in all, fewer on the busiest rank (without shadows rank 0 computes every
  // rank's tokens of expert 0)
  const auto rows = [&](int r, int p) { return passes[size_t(r)][size_t(p)].rows; };
  int64_t busiest_plain = 0, busiest_shadowed = 0, total_plain = 0, total_shadowed = 0;
  for (int r = 0; r < kRanks; ++r) {
    busiest_plain = std::max(busiest_plain, rows(r, 0));
    busiest_shadowed = std::max(busiest_shadowed, rows(r, 1));
    total_plain += rows(r, 0), total_shadowed += rows(r, 1);
  }
  CHECK(total_plain == 2 * 2 * kRanks * kTokens);  // k = 2, forward and backward
  CHECK(total_shadowed == total_plain);
  CHECK(busiest_plain == rows(0, 0));
  CHECK(busiest_shadowed < busiest_plain * 3 / 4);
}

}  // namespace shadow_exchange_test

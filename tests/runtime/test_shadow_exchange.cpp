// test_shadow_exchange.cpp — shadowed experts (runtime/shadows.h) through the DistributedExchange,
// three worker processes on real Gloo collectives. One layer's tokens crowd onto two experts: expert
// 0 held by rank 0 alone, expert 1 by ranks 1 and 2. Each rank runs the layer forward and backward
// four times on fresh units: without shadows, with them, with them and every unit frozen (MoEtion's
// replay: its shadows must compute no weight gradient either), and with them and the upstream log
// (train.expert_logs) — from the three ranks' logs alone, each expert's replayed update
// (model/expert_replay.h) equals the one its holders' gradients make, bit for bit, shadows included;
// a replay that left the shadows out would not. Shadowed, the busiest rank
// computes fewer rows and the ranks as many in all, and the outputs, input gradients and every
// expert's weight gradient (summed over its holders, as the holders' gradient sync sums them) equal a
// single process's LocalExchange over all three ranks' tokens within float reassociation; a source
// that dropped or misplaced its shadows' gradients is off by a large part of them (a misplaced send
// buffer was, before the test caught it).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "ckpt/slice_frames.h"
#include "comm/collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "model/expert_replay.h"
#include "model/local_exchange.h"
#include "runtime/distributed_exchange.h"
#include "support/parts_bytes.h"

using namespace sal;
using namespace sal::runtime;
using sal::test::Workers;

namespace shadow_exchange_test {
namespace {

constexpr int kRanks = 3, kTokens = 256, kSeed = 5, kPasses = 4;
constexpr int kLogged = 3;  // the pass with the upstream log
constexpr double kNorm = 0.7;  // the step's gradient norm for the replayed update (above the clip)

model::Dims dims() {
  model::Dims d;
  d.layers = 1, d.d = 16, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 8, d.vocab = 64;
  return d;
}

// R[e][rank]: expert 0 on rank 0, expert 1 on ranks 1 and 2, expert 2 on rank 2, expert 3 on rank 0.
const std::vector<Counts> kReplicas = {{{1, 0, 0}, {0, 1, 1}, {0, 0, 1}, {1, 0, 0}}};

bool holds(int rank, int e) { return kReplicas[0][size_t(e)][size_t(rank)] > 0; }

model::OptimConfig optim() {
  model::OptimConfig c;
  c.lr = 1e-2, c.warmup = 2, c.total_steps = 10, c.clip = 0.5;
  return c;
}

// A rank's tokens: rows from its own stream, nearly all routed to experts 0 and 1; each slot's
// output gradient is the combine's, its weight times its token's gradient (d_out = w * dy).
struct Inputs {
  std::vector<float> x, d_out, dy, w;
  model::Routing r;
};

Inputs inputs(int rank) {
  std::mt19937 rng(uint32_t(100 + rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Inputs in;
  const int D = dims().d;
  in.x.resize(size_t(kTokens) * D);
  in.dy.resize(size_t(kTokens) * D);
  in.w.resize(size_t(kTokens) * 2);
  for (float& v : in.x) v = u(rng);
  for (float& v : in.dy) v = u(rng);
  for (float& v : in.w) v = u(rng);
  for (size_t slot = 0; slot < in.w.size(); ++slot)
    for (int j = 0; j < D; ++j) in.d_out.push_back(in.w[slot] * in.dy[slot / 2 * size_t(D) + size_t(j)]);
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

// What a rank sends back for each pass: "OK", then out, dx, rows, and each expert's gradient; after
// the logged pass, its log as a worker puts it to its peers.
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
  for (int pass = 0; pass < kPasses; ++pass) {  // plain, shadowed, shadowed and frozen, shadowed and logged
    auto params = model::Params::create(dims(), kSeed, held);
    for (auto& [key, u] : params.experts) u.frozen = pass == 2;
    DistributedExchange ex(**c, params, kReplicas);
    ex.shadows = pass > 0;
    model::IterationLog log;
    if (pass == kLogged) ex.log = &log;
    std::vector<float> y(in.d_out.size()), dx(in.d_out.size());
    if (auto s = ex.forward(0, in.x.data(), in.r, y.data()); !s) return "FAIL forward: " + s.error().message();
    ex.note_combine(0, in.dy.data(), in.w.data());  // as the MoE layer's combine backward notes it
    if (auto s = ex.backward(0, in.d_out.data(), dx.data()); !s) return "FAIL backward: " + s.error().message();
    put(out, y);
    put(out, dx);
    put(out, {float(ex.expert_rows())});
    for (int e = 0; e < 4; ++e) {
      const model::Unit* u = params.expert(0, e);
      put(out, u ? u->g : std::vector<float>{});
    }
    if (pass == kLogged) {
      wire::SlicePut head;
      head.writer_index = uint32_t(rank), head.grad_norm = kNorm;
      sal::test::put_parts(out, ckpt::encode_log(head, ckpt::whole(log)));
    }
  }
  return out;
}

// Expert e's update from its holders' gradients (summed in ascending order from +0, as the holders'
// gradient sync sums them; one holder's as it is), clipped with kNorm: what every holder reaches.
model::Unit holders_update(const std::vector<std::vector<float>>& grads_by_rank, int e) {
  model::Unit u = model::make_unit(dims(), UnitId{UnitKind::expert, 0, e}, kSeed);
  int holders = 0;
  for (int r = 0; r < kRanks; ++r) holders += holds(r, e);
  std::fill(u.g.begin(), u.g.end(), 0.0f);
  for (int r = 0; r < kRanks; ++r) {
    if (!holds(r, e)) continue;
    const auto& g = grads_by_rank[size_t(r)];
    REQUIRE(g.size() == u.g.size());
    if (holders == 1) u.g = g;
    else
      for (size_t i = 0; i < g.size(); ++i) u.g[i] += g[i];
  }
  model::adamw_unit(dims(), u, optim(), model::learning_rate(optim(), 0), model::clip_scale(optim(), kNorm), 1);
  return u;
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
  std::vector<std::vector<Pass>> passes(kRanks);  // [rank][plain, shadowed, frozen, logged]
  std::vector<model::IterationLog> logs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const std::string& rep = reports[size_t(r)];
    REQUIRE_MESSAGE(rep.rfind("OK", 0) == 0, rep);
    size_t at = 2;
    for (int p = 0; p < kPasses; ++p) {
      Pass pass;
      pass.out = get(rep, at);
      pass.dx = get(rep, at);
      pass.rows = int64_t(get(rep, at).at(0));
      for (int e = 0; e < 4; ++e) pass.grads.push_back(get(rep, at));
      passes[size_t(r)].push_back(std::move(pass));
    }
    auto parts = sal::test::get_parts(rep, at);
    REQUIRE(parts);
    auto d = ckpt::decode_slot(*parts, dims());  // the wire's own checks on the way
    REQUIRE_MESSAGE(d.ok(), d.error().message());
    logs[size_t(r)] = std::move(d->log);
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
    for (int p = 0; p < kPasses; ++p) {
      CAPTURE(r);
      CAPTURE(p);
      CHECK(rel_diff(passes[size_t(r)][size_t(p)].out, y) < 1e-5);
      CHECK(rel_diff(passes[size_t(r)][size_t(p)].dx, dx) < 1e-5);
    }
  }
  for (int p : {0, 1, kLogged})
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
  CHECK(rows(0, kLogged) == rows(0, 1));  // the log changes nothing of what is computed where

  // the upstream logs: each expert's replayed update is its holders', bit for bit, shadows included
  std::vector<const model::IterationLog*> senders;
  for (const auto& l : logs) senders.push_back(&l);
  for (int e = 0; e < 4; ++e) {
    CAPTURE(e);
    std::vector<std::vector<float>> grads;
    for (int r = 0; r < kRanks; ++r) grads.push_back(passes[size_t(r)][size_t(kLogged)].grads[size_t(e)]);
    const model::Unit want = holders_update(grads, e);
    model::Unit got = model::make_unit(dims(), UnitId{UnitKind::expert, 0, e}, kSeed);
    auto st = model::replay_expert_step(dims(), got, optim(), 0, kNorm, senders);
    REQUIRE_MESSAGE(st.ok(), st.error().message());
    CHECK(got.w == want.w);
    CHECK(got.m == want.m);
    CHECK(got.v == want.v);
  }
}

}  // namespace shadow_exchange_test

// test_expert_replay.cpp — MoEtion's upstream logging for experts (model/expert_replay.h), with three
// worker processes on real Gloo collectives: each rank trains four steps of a two-layer model
// through the DistributedExchange, two micro-batch passes a step, logging what it dispatches;
// experts are held once, twice and three times. Each log comes back as the log-only SlicePut a
// worker puts to its peers (ckpt/slice_frames.h). From each expert's initial state and the three
// ranks' logs alone, the replay reaches the state every holder reached — weights and both moments,
// bit for bit, for both families' experts. A replay missing one sender's rows does not, and logs that disagree with the
// plan's shape are refused naming the sender.
#include <doctest/doctest.h>

#include "ckpt/slice_frames.h"
#include "comm/collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "model/data.h"
#include "model/expert_replay.h"
#include "model/model.h"
#include "runtime/distributed_exchange.h"
#include "runtime/expert_grads.h"
#include "support/parts_bytes.h"

using namespace sal;
using namespace sal::runtime;
using sal::test::get_parts;
using sal::test::put_parts;
using sal::test::Workers;

namespace expert_replay_test {
namespace {

constexpr int kRanks = 3, kSteps = 4, kSeed = 7;

bool g_llama = false;  // the family the workers train (set before they fork)

model::Dims dims() {
  model::Dims d;
  d.layers = 2, d.d = 16, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 8, d.vocab = 64;
  if (g_llama) {  // SwiGLU experts, grouped-query attention, a sigmoid router
    d.family = ModelFamily::llama;
    d.kv_dim = 8, d.expert_ffn = 12, d.shared_ffn = 12, d.sigmoid_router = true, d.norm_topk = true;
  }
  return d;
}

model::OptimConfig optim() {
  model::OptimConfig c;
  c.lr = 1e-2, c.warmup = 2, c.total_steps = 10, c.clip = 0.5;  // a clip the norms exceed: the recorded norm matters
  return c;
}

// [layer] -> R[expert][rank]
std::vector<Counts> replicas() {
  return {{{1, 1, 0}, {0, 0, 1}, {1, 1, 1}, {0, 1, 0}}, {{1, 0, 1}, {1, 0, 0}, {0, 1, 1}, {0, 0, 1}}};
}

model::Corpus corpus() {
  std::vector<uint32_t> t;
  for (uint32_t i = 0; i < 4000; ++i) t.push_back((i * 37 + i / 7) % 64);
  return model::Corpus::from_tokens(std::move(t), "test");
}

struct RankRun {
  std::vector<model::IterationLog> logs;  // per step
  std::vector<double> norms;
  model::Params params;  // the experts it holds, after the last step
};

// One rank's training; its logs (one log-only SlicePut a step, as a worker puts them) and then its
// experts in full (a SlicePut slot), or "FAIL ...".
std::string train_rank(int rank, const std::string& endpoint) {
  zmq::context_t zmq{1};
  comm::StoreClient store(zmq, endpoint);
  comm::GlooOptions o;
  o.rank = rank, o.size = kRanks, o.prefix = "replay", o.connect_timeout_ms = 3000, o.op_timeout_ms = 5000;
  auto c = comm::connect_gloo(o, store);
  if (!c) return "FAIL connect: " + c.error().message();
  auto reps = replicas();
  std::vector<std::pair<int, int>> held;
  for (int l = 0; l < 2; ++l)
    for (int e = 0; e < 4; ++e)
      if (reps[size_t(l)][size_t(e)][size_t(rank)]) held.emplace_back(l, e);
  auto params = model::Params::create(dims(), kSeed, held);
  const auto data = corpus();
  const auto shared = shared_experts(reps);
  std::string out;
  for (int step = 0; step < kSteps; ++step) {
    params.zero_grads();
    model::IterationLog log;
    for (uint32_t pass = 0; pass < 2; ++pass) {  // two sequences a rank, one a pass
      DistributedExchange ex(**c, params, reps);
      ex.log = &log, ex.log_pass = pass;
      auto b = model::make_batch(data, kSeed, uint64_t(step), rank * 2 + int(pass), 1, dims().seq_len);
      auto m = model::make_model(params);
      m->set_aux_share(0.5);
      if (auto s = m->step(b, int64_t(kRanks) * 2 * dims().seq_len, ex); !s) return "FAIL step: " + s.error().message();
    }
    if (auto s = sum_dense_gradients(**c, params); !s) return "FAIL " + s.error().message();
    if (auto s = reduce_among_holders(**c, rank, shared, params); !s) return "FAIL " + s.error().message();
    auto norm = global_grad_norm(**c, params, reps);
    if (!norm) return "FAIL " + norm.error().message();
    model::apply_adamw(params, optim(), model::learning_rate(optim(), step), model::clip_scale(optim(), *norm), step + 1);
    wire::SlicePut head;
    head.writer_index = uint32_t(rank), head.step = uint64_t(step), head.grad_norm = *norm;
    put_parts(out, ckpt::encode_log(head, ckpt::whole(log)));
  }
  ckpt::SparseSlot slot;
  for (auto& [le, u] : params.experts) {
    ckpt::UnitCopy copy{true, u.w, u.m, u.v, 0};
    copy.checksum = ckpt::unit_checksum(copy);
    slot.units[u.id] = std::move(copy);
  }
  put_parts(out, ckpt::encode_slot(wire::SlicePut{}, slot));
  return out;
}

std::vector<RankRun> train() {
  Workers w(kRanks, train_rank);
  zmq::context_t ctx{1};
  comm::StoreServer server{ctx, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  w.go(*ep);
  auto reports = w.collect(60000);
  std::vector<RankRun> runs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const std::string& rep = reports[size_t(r)];
    REQUIRE_MESSAGE(rep.rfind("FAIL", 0) != 0, rep);
    REQUIRE_MESSAGE(rep.rfind("DIED", 0) != 0, rep);
    size_t at = 0;
    for (int step = 0; step <= kSteps; ++step) {
      auto parts = get_parts(rep, at);
      REQUIRE(parts);
      auto d = ckpt::decode_slot(*parts, dims());  // the wire's own checks on the way
      REQUIRE_MESSAGE(d.ok(), d.error().message());
      if (step == kSteps) {
        runs[size_t(r)].params.dims = dims();
        for (auto& [id, copy] : d->slot.units) {
          model::Unit u = model::make_unit(dims(), id, kSeed);
          u.w = copy.w, u.m = copy.m, u.v = copy.v;
          runs[size_t(r)].params.experts[{id.layer, id.expert}] = std::move(u);
        }
        continue;
      }
      CHECK(ckpt::damaged_logs(*d).empty());
      runs[size_t(r)].logs.push_back(std::move(d->log));
      runs[size_t(r)].norms.push_back(d->head.grad_norm);
    }
  }
  return runs;
}

// The expert from its initial state through every step, from the ranks' logs (`drop`: a sender
// whose logs are left out).
Result<model::Unit> replay(const std::vector<RankRun>& runs, int layer, int e, int drop = -1) {
  model::Unit u = model::make_unit(dims(), UnitId{UnitKind::expert, layer, e}, kSeed);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<const model::IterationLog*> senders;
    for (int r = 0; r < kRanks; ++r) senders.push_back(r == drop ? nullptr : &runs[size_t(r)].logs[size_t(step)]);
    SAL_TRY(model::replay_expert_step(dims(), u, optim(), uint64_t(step), runs[0].norms[size_t(step)], senders));
  }
  return u;
}

}  // namespace

void replays_bit_for_bit() {
  auto runs = train();
  for (int r = 1; r < kRanks; ++r) CHECK(runs[size_t(r)].norms == runs[0].norms);
  CHECK(runs[0].norms[0] > optim().clip);  // the clip is in force
  size_t bytes = 0;
  for (const auto& l : runs[0].logs) bytes += l.bytes();
  MESSAGE("rank 0 logged " << bytes << " bytes over " << kSteps << " steps");
  CHECK(bytes > 0);
  auto reps = replicas();
  for (int l = 0; l < 2; ++l)
    for (int e = 0; e < 4; ++e) {
      CAPTURE(l);
      CAPTURE(e);
      auto got = replay(runs, l, e);
      REQUIRE_MESSAGE(got.ok(), got.error().message());
      for (int r = 0; r < kRanks; ++r) {
        if (!reps[size_t(l)][size_t(e)][size_t(r)]) continue;
        const model::Unit* held = runs[size_t(r)].params.expert(l, e);
        REQUIRE(held);
        CHECK(got->w == held->w);
        CHECK(got->m == held->m);
        CHECK(got->v == held->v);
      }
      // without one sender's rows the expert drifts (every rank sends to every expert here)
      auto short_one = replay(runs, l, e, 1);
      REQUIRE(short_one.ok());
      CHECK(short_one->w != got->w);
    }
}

TEST_CASE("expert replay: from the senders' logs alone, every expert reaches its holders' state bit for bit") {
  g_llama = false;
  replays_bit_for_bit();
}

TEST_CASE("expert replay: moe-llama's SwiGLU experts too") {
  g_llama = true;
  replays_bit_for_bit();
  g_llama = false;
}

TEST_CASE("expert replay: logs that disagree with the plan are refused, naming the sender") {
  g_llama = false;
  auto runs = train();
  model::IterationLog bad = runs[2].logs[0];
  auto& rows = bad.rows.begin()->second;
  const model::LogKey key = bad.rows.begin()->first;
  rows.to.back() += 1;  // one row more than it logged
  model::Unit u = model::make_unit(dims(), UnitId{UnitKind::expert, key.layer, key.expert}, kSeed);
  auto s = model::replay_expert_step(dims(), u, optim(), 0, runs[0].norms[0],
                                     {&runs[0].logs[0], &runs[1].logs[0], &bad});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("the log of rank 2") != std::string::npos);
  CHECK(s.error().message().find("sent") != std::string::npos);
  rows.to.back() -= 1;
  // a layer's tokens without their gradients (a model that never said how it combined)
  model::IterationLog no_grads = bad;
  no_grads.tokens.at({key.pass, key.layer}).dy.clear();
  s = model::replay_expert_step(dims(), u, optim(), 0, runs[0].norms[0], {&runs[0].logs[0], &runs[1].logs[0], &no_grads});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("its gradients logged?") != std::string::npos);
  rows.holders = {0};
  s = model::replay_expert_step(dims(), u, optim(), 0, runs[0].norms[0], {&runs[0].logs[0], &runs[1].logs[0], &bad});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("holders") != std::string::npos);
}

}  // namespace expert_replay_test

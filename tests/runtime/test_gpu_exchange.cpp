// test_gpu_exchange.cpp — the GPU expert exchange of a plan of several ranks (runtime/gpu_exchange.h)
// against the CPU runtime::DistributedExchange run the same way on the same inputs. Staged: two
// ranks are two worker processes sharing GPU 0 (as several workers on one GPU are), each with its
// own kernels::cuda::Context and its own Gloo context over a real StoreServer. Direct (machines with
// two or more GPUs; the cases say skipped otherwise): each process on a GPU of its own, the rows and
// gradients over an NCCL communicator made through the same store, the host values over Gloo.
// (Not two threads of one process: connect_gloo finds a context's sockets among the process's by
// their addresses, comm/socket_watch.h, which assumes one rank per process.) Each rank runs the
// scenario, then the all-CPU reference over a second Gloo context, and compares the two itself.
//
// The plan is uneven: an expert on both ranks with two units on one of them, experts on one rank,
// in layer 1 an expert with two units on its only rank. Both layers run forward before both run
// backward (the exchange keeps what each layer's backward needs). Compared, per rank: the global
// statistics (exact), the combined outputs, the input gradients, the combine weights' gradients
// and every held expert's weight gradients (bf16 tolerance); then the gradient synchronisation
// (dense all-reduce, experts among their holders: identical bytes on every holder) and the global
// norm against the Trainer's CPU arithmetic. Also a GPU rank and a CPU rank in one plan, a rank
// without tokens, and the errors: an expert with tokens and no replica (every rank, naming it),
// rows scheduled to a rank that lacks the expert (naming it), and a failed all-to-all (with the
// layer and phase).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "comm/gpu_probe.h"
#include "comm/nccl_collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "kernels/cuda/buffer.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/permute.h"
#include "model/cuda/device_params.h"
#include "runtime/distributed_exchange.h"
#include "runtime/expert_grads.h"
#include "runtime/gpu_exchange.h"

using namespace sal;
namespace kc = sal::kernels::cuda;
using runtime::Counts;
using sal::test::Report;
using sal::test::Workers;
using sal::test::report_value;

namespace {

constexpr int kRanks = 2;
constexpr double kTol = 2e-2;  // bf16 GEMM operands against the fp32 CPU, relative 2-norm

// The model family of the scenario being run: moe-gpt's GELU experts, or moe-llama's SwiGLU experts
// when set (LlamaFamily, below). A file-level switch because the ranks' inputs and parameters are
// pure functions of the dims, read everywhere; the ranks are forked, so they see it as it was set.
bool g_llama = false;

model::Dims dims() {
  model::Dims d;
  d.layers = 2, d.d = 32, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 8, d.vocab = 64;
  if (g_llama) d.family = ModelFamily::llama, d.expert_ffn = 48;
  return d;
}

struct LlamaFamily {
  LlamaFamily() { g_llama = true; }
  ~LlamaFamily() { g_llama = false; }
};

// [layer] -> R[expert][rank].
std::vector<Counts> uneven_plan() {
  return {
      {{1, 2}, {1, 0}, {0, 1}, {1, 0}},  // e0 on both, rank 1 as two units (2/3 of e0's tokens there)
      {{0, 1}, {1, 1}, {2, 0}, {1, 1}},  // e2 as two units on its only rank
  };
}

struct Scenario {
  std::vector<Counts> plan = uneven_plan();
  std::vector<int> tokens = {23, 17};
  std::vector<bool> gpu = {true, true};  // which ranks run PlanDeviceExchange (the others the CPU one)
  bool sync = false;                     // also the gradient sync and the global norm
  int drop_rank = -1, drop_layer = -1, drop_expert = -1;  // a rank that lacks an expert the plan gives it
  int abort_rank = -1, abort_at = -1;    // that rank aborts its data plane before its abort_at-th all-to-all
  int64_t op_timeout_ms = 20000;
  bool direct = false;                   // GPU ranks on GPUs of their own, rows over NCCL (every rank a GPU one)
};

// What a rank saw; the main thread compares.
struct RankResult {
  std::string error;
  std::vector<std::vector<double>> stats;             // per layer: counts, prob sums, tokens
  std::vector<std::vector<float>> out, dx, dw;        // per layer
  std::map<std::pair<int, int>, std::vector<float>> expert_grads;
  std::vector<float> dense_grads;                     // after the sync: embedding, dense and gate units
  double norm = -1;
};

// ---------- inputs (a pure function of rank and layer) ----------

struct LayerInput {
  int tokens = 0;
  std::vector<int32_t> idx;
  std::vector<float> w, x, d_out, prob_sums;
};

// Each token's first expert favours a hot one (which depends on rank and layer), its second is
// uniform among the others: every expert gets tokens from both ranks, unevenly.
LayerInput layer_input(int rank, int layer, int tokens) {
  const model::Dims d = dims();
  const int E = d.experts, K = d.top_k, D = d.d;
  std::mt19937 rng(uint32_t(1000 + 17 * rank + layer));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.05f, 1.0f);
  LayerInput in;
  in.tokens = tokens;
  const int hot = (2 * rank + layer) % E;
  for (int t = 0; t < tokens; ++t) {
    int a = rng() % 7 < 4 ? hot : int(rng() % uint32_t(E));
    int b = (a + 1 + int(rng() % uint32_t(E - 1))) % E;
    in.idx.push_back(a), in.idx.push_back(b);
    in.w.push_back(unit(rng)), in.w.push_back(unit(rng));
  }
  for (int i = 0; i < tokens * D; ++i) in.x.push_back(normal(rng));
  for (int i = 0; i < tokens * D; ++i) in.d_out.push_back(normal(rng));
  for (int e = 0; e < E; ++e) in.prob_sums.push_back(double(unit(rng)) * tokens / E);
  (void)K;
  return in;
}

std::vector<double> local_stats(const LayerInput& in) {
  const int E = dims().experts;
  std::vector<double> s(size_t(2 * E + 1), 0.0);
  for (int32_t e : in.idx)
    if (e >= 0 && e < E) s[size_t(e)] += 1;
  for (int e = 0; e < E; ++e) s[size_t(E + e)] = in.prob_sums[size_t(e)];
  s.back() = in.tokens;
  return s;
}

// The rank's parameters: the experts the plan gives it (minus a dropped one), with weights a pure
// function of (layer, expert) so every holder has the same; dense and gate gradients that differ
// per rank (what the sync sums).
model::Params rank_params(int rank, const Scenario& sc) {
  const model::Dims d = dims();
  std::vector<std::pair<int, int>> held;
  for (int l = 0; l < d.layers; ++l)
    for (int e = 0; e < d.experts; ++e)
      if (sc.plan[size_t(l)][size_t(e)][size_t(rank)] > 0 &&
          !(rank == sc.drop_rank && l == sc.drop_layer && e == sc.drop_expert))
        held.emplace_back(l, e);
  model::Params p = model::Params::create(d, 7, held);
  for (auto& [key, u] : p.experts) {
    std::mt19937 rng(uint32_t(50 + key.first * d.experts + key.second));
    std::normal_distribution<float> normal(0.0f, 0.2f);
    for (float& v : u.w) v = normal(rng);
  }
  std::mt19937 rng(uint32_t(900 + rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (model::Unit* u : p.units())
    if (u->id.kind != model::UnitKind::expert)
      for (float& v : u->g) v = normal(rng);
  return p;
}

double sum_squares(const std::vector<float>& g) {
  double s = 0;
  for (float v : g) s += double(v) * v;
  return s;
}

// The before_alltoall hook of a scenario that aborts one rank's data plane (the one the rows go over).
std::function<void()> abort_hook(const Scenario& sc, int rank, comm::Collectives& c) {
  if (rank != sc.abort_rank) return {};
  auto calls = std::make_shared<int>(0);
  return [&c, calls, at = sc.abort_at] {
    if (++*calls == at) c.abort("the test aborts this rank's data plane");
  };
}

// ---------- one rank on the CPU (the reference) ----------

// Trainer::sync_gradients and Trainer::global_norm, on the host.
Status cpu_sync(comm::Collectives& c, const Scenario& sc, model::Params& p, RankResult& res) {
  std::vector<float> buf;
  for (model::Unit* u : p.non_expert_units()) buf.insert(buf.end(), u->g.begin(), u->g.end());
  SAL_TRY(c.allreduce_sum(buf.data(), buf.size()));
  res.dense_grads = buf;
  SAL_TRY(runtime::reduce_among_holders(c, c.rank(), runtime::shared_experts(sc.plan), p));
  double dense = sum_squares(buf), experts = 0;
  for (const auto& [key, u] : p.experts) {
    double h = 0;
    for (uint32_t units : sc.plan[size_t(key.first)][size_t(key.second)]) h += units > 0;
    experts += sum_squares(u.g) / std::max(h, 1.0);
  }
  SAL_TRY(c.allreduce_sum(&experts, 1));
  res.norm = std::sqrt(dense + experts);
  return {};
}

Status cpu_rank(comm::Collectives& c, const Scenario& sc, RankResult& res) {
  const model::Dims d = dims();
  const int me = c.rank(), K = d.top_k, D = d.d;
  model::Params p = rank_params(me, sc);
  runtime::DistributedExchange ex(c, p, sc.plan);
  ex.before_alltoall = abort_hook(sc, me, c);
  std::vector<LayerInput> in;
  std::vector<std::vector<float>> rows(size_t(d.layers));  // each layer's expert outputs per slot
  res.stats.resize(size_t(d.layers));
  res.out.resize(size_t(d.layers));
  res.dx.resize(size_t(d.layers));
  res.dw.resize(size_t(d.layers));
  for (int l = 0; l < d.layers; ++l) {
    in.push_back(layer_input(me, l, sc.tokens[size_t(me)]));
    const LayerInput& li = in.back();
    const int N = li.tokens, E = d.experts;
    std::vector<double> s = local_stats(li);
    std::vector<double> counts(s.begin(), s.begin() + E), probs(s.begin() + E, s.begin() + 2 * E);
    double tokens = s.back();
    SAL_TRY(ex.global_stats(l, counts, probs, tokens));
    res.stats[size_t(l)] = counts;
    res.stats[size_t(l)].insert(res.stats[size_t(l)].end(), probs.begin(), probs.end());
    res.stats[size_t(l)].push_back(tokens);
    rows[size_t(l)].assign(size_t(N) * K * D, 0.0f);
    SAL_TRY(ex.forward(l, li.x.data(), model::Routing{N, K, li.idx}, rows[size_t(l)].data()));
    // the gate-weighted combine, as moe_gpt.cpp
    std::vector<float>& out = res.out[size_t(l)];
    out.assign(size_t(N) * D, 0.0f);
    for (int t = 0; t < N; ++t)
      for (int j = 0; j < K; ++j)
        for (int i = 0; i < D; ++i)
          out[size_t(t) * D + i] += li.w[size_t(t) * K + j] * rows[size_t(l)][(size_t(t) * K + j) * D + i];
  }
  for (int l = d.layers - 1; l >= 0; --l) {
    const LayerInput& li = in[size_t(l)];
    const int N = li.tokens;
    std::vector<float> d_rows(size_t(N) * K * D), dx_rows(d_rows.size());
    std::vector<float>& dw = res.dw[size_t(l)];
    dw.assign(size_t(N) * K, 0.0f);
    for (int t = 0; t < N; ++t)
      for (int j = 0; j < K; ++j) {
        const size_t a = size_t(t) * K + j;
        double dot = 0;
        for (int i = 0; i < D; ++i) {
          d_rows[a * D + i] = li.w[a] * li.d_out[size_t(t) * D + i];
          dot += double(li.d_out[size_t(t) * D + i]) * rows[size_t(l)][a * D + i];
        }
        dw[a] = float(dot);
      }
    SAL_TRY(ex.backward(l, d_rows.data(), dx_rows.data()));
    std::vector<float>& dx = res.dx[size_t(l)];
    dx.assign(size_t(N) * D, 0.0f);
    for (size_t a = 0; a < size_t(N) * K; ++a)
      for (int i = 0; i < D; ++i) dx[(a / K) * D + i] += dx_rows[a * D + i];
  }
  if (sc.sync) SAL_TRY(cpu_sync(c, sc, p, res));
  for (const auto& [key, u] : p.experts) res.expert_grads[key] = u.g;
  return {};
}

// ---------- one rank on the GPU ----------

Status gpu(const kc::Status& s) { return model::gpu_status(s); }

template <class T>
Status take(Result<T>&& r, T& into) {
  if (!r) return r.error();
  into = std::move(*r);
  return {};
}

// Uploads on ctx's stream and waits (the Context's stream does not wait for the legacy stream).
template <class T>
Result<kc::Buffer<T>> up(const kc::Context& ctx, const std::vector<T>& v) {
  kc::Buffer<T> b;
  SAL_TRY(gpu(b.allocate(std::max<size_t>(v.size(), 1))));
  if (!v.empty())
    SAL_TRY(gpu(kc::cuda_status(
        int(cudaMemcpyAsync(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, ctx.stream())), "up")));
  SAL_TRY(gpu(ctx.synchronize()));
  return b;
}

// n elements, every byte 0xFF (NaN): an element the exchange forgets to write fails the comparison.
Result<kc::Buffer<float>> poisoned(const kc::Context& ctx, size_t n) {
  kc::Buffer<float> b;
  SAL_TRY(gpu(b.allocate(std::max<size_t>(n, 1))));
  SAL_TRY(gpu(kc::cuda_status(int(cudaMemsetAsync(b.get(), 0xFF, b.bytes(), ctx.stream())), "poison")));
  return b;
}

Result<std::vector<float>> down(const kc::Context& ctx, const kc::Buffer<float>& b, size_t n) {
  SAL_TRY(gpu(ctx.synchronize()));
  std::vector<float> v(n);
  if (n > 0)
    SAL_TRY(gpu(kc::cuda_status(
        int(cudaMemcpyAsync(v.data(), b.get(), n * sizeof(float), cudaMemcpyDeviceToHost, ctx.stream())), "down")));
  SAL_TRY(gpu(ctx.synchronize()));
  return v;
}

struct DeviceLayer {
  LayerInput in;
  kc::Buffer<int32_t> idx;
  kc::Buffer<uint32_t> counts;
  kc::Buffer<float> w, x, d_out, out, dx, dw;
  model::DeviceRouting routing() const {
    return {in.tokens, dims().top_k, idx.get(), w.get(), counts.get()};
  }
};

// plane: null (staged over c), or the device data plane the rows and gradients go over (direct).
Status gpu_rank(comm::Collectives& c, comm::Collectives* plane, const Scenario& sc, RankResult& res) {
  const model::Dims d = dims();
  const int me = c.rank(), K = d.top_k, D = d.d, E = d.experts;
  std::unique_ptr<kc::Context> ctx;
  SAL_TRY(gpu(kc::Context::create(plane ? me : 0, &ctx)));
  model::Params host = rank_params(me, sc);
  auto dp = model::DeviceParams::create(*ctx, host);
  if (!dp) return dp.error();
  model::DeviceParams& p = **dp;
  SAL_TRY(p.upload(host, model::kGrads));  // the dense units' per-rank gradients
  std::vector<DeviceLayer> layers(size_t(d.layers));
  {
    runtime::PlanDeviceExchange ex(c, plane, p, sc.plan);
    ex.before_alltoall = abort_hook(sc, me, plane ? *plane : c);
    res.stats.resize(size_t(d.layers));
    res.out.resize(size_t(d.layers));
    res.dx.resize(size_t(d.layers));
    res.dw.resize(size_t(d.layers));
    for (int l = 0; l < d.layers; ++l) {
      DeviceLayer& dl = layers[size_t(l)];
      dl.in = layer_input(me, l, sc.tokens[size_t(me)]);
      const size_t N = size_t(dl.in.tokens);
      SAL_TRY(take(up(*ctx, dl.in.idx), dl.idx));
      SAL_TRY(take(up(*ctx, dl.in.w), dl.w));
      SAL_TRY(take(up(*ctx, dl.in.x), dl.x));
      SAL_TRY(take(up(*ctx, dl.in.d_out), dl.d_out));
      SAL_TRY(take(up(*ctx, std::vector<uint32_t>(size_t(E), 0xFFFFFFFFu)), dl.counts));
      SAL_TRY(take(poisoned(*ctx, N * D), dl.out));
      SAL_TRY(take(poisoned(*ctx, N * D), dl.dx));
      SAL_TRY(take(poisoned(*ctx, N * K), dl.dw));
      SAL_TRY(gpu(kc::count_assignments(*ctx, dl.idx.get(), int(N), K, E, dl.counts.get())));

      std::vector<double> s = local_stats(dl.in);
      std::vector<double> cnt(s.begin(), s.begin() + E), probs(s.begin() + E, s.begin() + 2 * E);
      double tokens = s.back();
      SAL_TRY(ex.global_stats(l, cnt, probs, tokens));
      res.stats[size_t(l)] = cnt;
      res.stats[size_t(l)].insert(res.stats[size_t(l)].end(), probs.begin(), probs.end());
      res.stats[size_t(l)].push_back(tokens);
      SAL_TRY(ex.forward(l, dl.routing(), dl.x.get(), dl.out.get()));
    }
    for (int l = d.layers - 1; l >= 0; --l) {
      DeviceLayer& dl = layers[size_t(l)];
      SAL_TRY(ex.backward(l, dl.routing(), dl.d_out.get(), dl.dx.get(), dl.dw.get()));
    }
    for (int l = 0; l < d.layers; ++l) {
      DeviceLayer& dl = layers[size_t(l)];
      const size_t N = size_t(dl.in.tokens);
      SAL_TRY(take(down(*ctx, dl.out, N * D), res.out[size_t(l)]));
      SAL_TRY(take(down(*ctx, dl.dx, N * D), res.dx[size_t(l)]));
      SAL_TRY(take(down(*ctx, dl.dw, N * K), res.dw[size_t(l)]));
    }
  }
  if (sc.sync) {
    runtime::PlanGradientSync sync(p, plane);
    SAL_TRY(sync.sync(c, runtime::shared_experts(sc.plan)));
    std::vector<model::UnitId> ids;
    std::vector<double> sums;
    for (model::DeviceUnit* u : p.units()) {
      model::Unit h;
      SAL_TRY(p.download_unit(u->id, h, model::kGrads));
      ids.push_back(u->id);
      sums.push_back(sum_squares(h.g));
      if (u->id.kind != model::UnitKind::expert) res.dense_grads.insert(res.dense_grads.end(), h.g.begin(), h.g.end());
    }
    auto norm = runtime::global_grad_norm(c, ids, sums, sc.plan);
    if (!norm) return norm.error();
    res.norm = *norm;
  }
  for (auto [l, e] : p.held_experts()) {
    model::Unit h;
    SAL_TRY(p.download_unit({model::UnitKind::expert, l, e}, h, model::kGrads));
    res.expert_grads[{l, e}] = h.g;
  }
  return {};
}

// ---------- running the ranks ----------

// ||got - ref|| / ||ref|| in double; infinite for a NaN or a size mismatch.
double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    const double e = double(got[i]) - ref[i];
    num += e * e;
    den += double(ref[i]) * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2e", v);
  return b;
}

// A rank's results against the CPU reference's for the same rank, into the child's report.
void compare_rank(const RankResult& got, const RankResult& want, const Scenario& sc, int rank, Report& rep) {
  rep.check(want.error.empty(), "CPU reference: " + want.error);
  rep.check(got.error.empty(), "run: " + got.error);
  if (!want.error.empty() || !got.error.empty()) return;
  rep.check(got.stats == want.stats, "global statistics differ");
  rep.check(got.out.size() == want.out.size(), "layers");
  double worst = 0;
  auto close = [&](const std::vector<float>& g, const std::vector<float>& w, const std::string& what) {
    const double e = rel_error(g, w);
    worst = std::max(worst, e);
    rep.check(e <= kTol, what + ": relative error " + fmt(e));
  };
  for (size_t l = 0; l < want.out.size() && l < got.out.size(); ++l) {
    const std::string L = "layer " + std::to_string(l) + " ";
    if (sc.tokens[size_t(rank)] > 0) {  // the comparisons mean something
      rep.check(sum_squares(want.out[l]) > 0, L + "reference output is zero");
      rep.check(sum_squares(want.dx[l]) > 0, L + "reference dx is zero");
    }
    close(got.out[l], want.out[l], L + "out");
    close(got.dx[l], want.dx[l], L + "dx");
    close(got.dw[l], want.dw[l], L + "d_w");
  }
  rep.check(got.expert_grads.size() == want.expert_grads.size(), "held experts");
  for (const auto& [key, ref] : want.expert_grads) {
    const std::string name = "layer" + std::to_string(key.first) + ".expert" + std::to_string(key.second);
    auto it = got.expert_grads.find(key);
    rep.check(it != got.expert_grads.end(), name + " missing");
    if (it == got.expert_grads.end()) continue;
    rep.check(sum_squares(ref) > 0, name + ": reference gradient is zero (no rows reached it)");
    close(it->second, ref, name + " gradient");
  }
  if (sc.sync) {
    const double e = rel_error(got.dense_grads, want.dense_grads);  // the same sums of the same values
    rep.check(e <= 1e-6, "dense gradients after the sync: relative error " + fmt(e));
    rep.check(want.norm > 0 && std::abs(got.norm - want.norm) <= kTol * want.norm,
              "global norm " + fmt(got.norm) + " against " + fmt(want.norm));
  }
  rep.note("worst_rel_error=" + fmt(worst));
}

// FNV-1a of a gradient's bytes: the ranks holding one expert compare theirs through the reports.
uint64_t hash(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// One rank (a child process): the scenario's run and, unless it is about errors, the all-CPU
// reference over a second Gloo context, compared here. Notes: error=..., and with sync one
// grad.L.E=hash per held shared expert.
std::string rank_body(int rank, const std::string& endpoint, const Scenario& sc, bool reference) {
  Report rep;
  zmq::context_t z{1};
  comm::StoreClient store(z, endpoint);
  auto run_as = [&](const std::string& prefix, const std::vector<bool>& gpu, RankResult& res) {
    comm::GlooOptions o;
    o.rank = rank, o.size = kRanks, o.prefix = prefix, o.connect_timeout_ms = 10000, o.op_timeout_ms = sc.op_timeout_ms;
    auto c = comm::connect_gloo(o, store);
    if (!c) {
      res.error = "connect: " + c.error().message();
      return;
    }
    std::unique_ptr<comm::Collectives> plane;  // direct: NCCL on this rank's GPU, as the GPU worker connects it
    if (sc.direct && gpu[size_t(rank)]) {
      comm::NcclOptions n;
      n.rank = rank, n.size = kRanks, n.device = rank, n.prefix = prefix + "/device", n.op_timeout_ms = sc.op_timeout_ms;
      auto made = comm::connect_nccl(n, store);
      if (!made) {
        res.error = "connect NCCL: " + made.error().message();
        return;
      }
      plane = std::move(*made);
    }
    Status s = gpu[size_t(rank)] ? gpu_rank(**c, plane.get(), sc, res) : cpu_rank(**c, sc, res);
    if (!s) {
      res.error = s.error().message();
      (*c)->abort("rank " + std::to_string(rank) + " failed");  // as a worker would: the peers stop waiting
      if (plane) plane->abort("rank " + std::to_string(rank) + " failed");
    }
  };
  RankResult got;
  run_as("run", sc.gpu, got);
  if (reference) {
    RankResult want;
    run_as("reference", std::vector<bool>(kRanks, false), want);
    compare_rank(got, want, sc, rank, rep);
  }
  rep.note("error=" + got.error);
  if (sc.sync)
    for (const runtime::SharedExpert& s : runtime::shared_experts(sc.plan))
      if (auto it = got.expert_grads.find({s.layer, s.expert}); it != got.expert_grads.end())
        rep.note("grad." + std::to_string(s.layer) + "." + std::to_string(s.expert) + "=" +
                 std::to_string(hash(it->second)));
  return rep.text();
}

// The ranks as worker processes (forked before this process starts any thread; none of them
// initialises CUDA here), over a real StoreServer. Returns each rank's report.
std::vector<std::string> run(const Scenario& sc, bool reference) {
  Workers w(kRanks, [&sc, reference](int rank, const std::string& ep) { return rank_body(rank, ep, sc, reference); });
  zmq::context_t zmq{1};
  comm::StoreServer server{zmq, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  w.go(*ep);
  auto reports = w.collect(240000);
  for (size_t r = 0; r < reports.size(); ++r) MESSAGE("rank " << r << ": " << reports[r]);
  return reports;
}

void check_against_cpu(const Scenario& sc) {
  auto reports = run(sc, true);
  for (size_t r = 0; r < reports.size(); ++r) {
    CAPTURE(r);
    CAPTURE(reports[r]);
    CHECK(reports[r].rfind("OK\n", 0) == 0);
  }
  if (!sc.sync) return;
  // after the sync, every holder of a shared expert has the same bytes
  for (const runtime::SharedExpert& s : runtime::shared_experts(sc.plan)) {
    const std::string key = "grad." + std::to_string(s.layer) + "." + std::to_string(s.expert);
    CAPTURE(key);
    for (int h : s.holders) {
      CHECK(report_value(reports[size_t(h)], key) != "");
      CHECK(report_value(reports[size_t(h)], key) == report_value(reports[size_t(s.holders[0])], key));
    }
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("staged exchange: two GPU ranks on one GPU compute what two CPU ranks compute, gradient sync included") {
  Scenario sc;
  sc.sync = true;
  check_against_cpu(sc);
}

TEST_CASE("staged exchange: moe-llama's SwiGLU experts on two GPU ranks of one GPU compute what two CPU ranks compute") {
  LlamaFamily llama;
  Scenario sc;
  sc.sync = true;
  check_against_cpu(sc);
}

TEST_CASE("staged exchange: a GPU rank and a CPU rank in one plan compute what two CPU ranks compute") {
  Scenario sc;
  sc.sync = true;
  sc.gpu = {true, false};
  check_against_cpu(sc);
  sc.gpu = {false, true};
  check_against_cpu(sc);
}

TEST_CASE("staged exchange: a rank without tokens still computes the experts it holds for the other") {
  Scenario sc;
  sc.tokens = {0, 19};
  check_against_cpu(sc);
}

TEST_CASE("staged exchange: an expert with tokens and no replica fails the dispatch on every rank, naming it") {
  Scenario sc;
  sc.plan[1][3] = {0, 0};  // layer 1 expert 3 gets tokens (the second choices are uniform) but has no replica
  auto res = run(sc, false);
  for (int r = 0; r < kRanks; ++r) {
    const std::string error = report_value(res[size_t(r)], "error");
    CAPTURE(error);
    CHECK(contains(error, "layer 1 forward: dispatch: expert 3 has "));
    CHECK(contains(error, "no replica"));
  }
}

TEST_CASE("staged exchange: rows scheduled to a rank that lacks the expert are an error naming it") {
  Scenario sc;
  sc.drop_rank = 1, sc.drop_layer = 0, sc.drop_expert = 2;  // the plan gives rank 1 layer 0 expert 2
  sc.op_timeout_ms = 5000;
  auto res = run(sc, false);
  const std::string e1 = report_value(res[1], "error"), e0 = report_value(res[0], "error");
  CAPTURE(e1);
  CAPTURE(e0);
  CHECK(contains(e1, "layer 0 forward: "));
  CHECK(contains(e1, "tokens of expert 2 are scheduled to rank 1, which does not hold it"));
  CHECK(contains(e0, "layer 0 forward: all-to-all of the tokens"));  // its peer gave up
}

// Rank 0 aborts the plane the rows go over before its third all-to-all (layer 0's forward has two:
// the third is layer 1's first): both ranks fail there, naming the layer and phase. Returns the
// scenario for more.
Scenario check_aborted_all_to_all(bool direct) {
  Scenario sc;
  sc.direct = direct;
  sc.abort_rank = 0, sc.abort_at = 3;
  sc.op_timeout_ms = 5000;
  auto res = run(sc, false);
  for (int r = 0; r < kRanks; ++r) {
    const std::string error = report_value(res[size_t(r)], "error");
    CAPTURE(r);
    CAPTURE(error);
    CHECK(contains(error, "layer 1 forward: all-to-all of the tokens: "));
  }
  return sc;
}

TEST_CASE("staged exchange: a failed all-to-all comes back with the layer and phase, never a crash") {
  Scenario sc = check_aborted_all_to_all(false);
  sc.abort_at = 6;  // four in the forward; the backward starts with layer 1: output, then input gradients
  auto res = run(sc, false);
  const std::string error = report_value(res[0], "error");
  CAPTURE(error);
  CHECK(contains(error, "layer 1 backward: all-to-all of the input gradients: "));
}

// ---------- direct: GPUs of their own, rows and gradients over NCCL ----------

bool two_gpus() {
  const int n = sal::test::probed_gpus().count;
  if (n < 2) MESSAGE("skipped: this machine has " << n << " GPU(s); the direct exchange needs one per rank (2)");
  return n >= 2;
}

TEST_CASE("direct exchange: two ranks on GPUs of their own over NCCL compute what two CPU ranks compute, gradient sync included") {
  if (!two_gpus()) return;
  Scenario sc;
  sc.direct = true;
  sc.sync = true;
  check_against_cpu(sc);
  sc.tokens = {0, 19};  // a rank without tokens still computes for the other
  check_against_cpu(sc);
}

TEST_CASE("direct exchange: an NCCL all-to-all aborted on one rank comes back with the layer and phase on both") {
  if (two_gpus()) check_aborted_all_to_all(true);
}

// trainer.cpp — see trainer.h.
#include "runtime/trainer.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "comm/gloo_collectives.h"
#include "core/clock.h"
#include "core/devices.h"
#include "core/paths.h"
#include "core/strings.h"
#include "kernels/cpu/ops.h"
#include "ckpt/format.h"
#include "model/optimizer.h"
#include "plan/plan.h"
#include "runtime/exchange.h"
#include "runtime/slice_fetch.h"
#include "wire/curve.h"

namespace sal::runtime {

// How long a restoring worker waits for one holder's answer before asking the next.
constexpr int kFetchTimeoutMs = 10000;

// A plan's data planes. A pair connect to a peer that never comes costs a few times kConnectTimeoutMs
// (Gloo's pair connect cannot be interrupted), so it is short: the controller retries a failed
// plan. The waits for the peers' rendezvous keys are longer — an abort interrupts them — so that
// a peer still leaving an abandoned plan's pair connects arrives in time.
constexpr int64_t kConnectTimeoutMs = 1000;
constexpr int64_t kRendezvousTimeoutMs = 8000;

// One device snapshot at a time (DeviceCompute holds one): `busy` from begin_snapshot() until its
// units are taken, on whichever thread. `device` goes null when the Trainer does, so units taken
// later fail instead of reaching a closed device; the mutex is held while they are taken, so the
// device is not closed under them.
struct Trainer::SnapshotGate {
  std::mutex mu;
  std::condition_variable cv;
  bool busy = false;
  DeviceCompute* device = nullptr;
};

// A begun device snapshot: taking its units (once) waits for the device's copy and frees the gate.
// Dropped untaken, it still ends the snapshot, so a next one is not kept waiting forever.
class Trainer::PendingSnapshot {
 public:
  explicit PendingSnapshot(std::shared_ptr<Trainer::SnapshotGate> gate) : gate_(std::move(gate)) {}
  ~PendingSnapshot() {
    if (!taken_) (void)take();
  }
  PendingSnapshot(const PendingSnapshot&) = delete;
  PendingSnapshot& operator=(const PendingSnapshot&) = delete;

  Result<std::vector<model::Unit>> take() {
    std::lock_guard<std::mutex> lock(gate_->mu);
    if (taken_) return fail("this snapshot's units were already taken");
    taken_ = true;
    auto units = gate_->device ? gate_->device->finish_snapshot()
                               : Result<std::vector<model::Unit>>(fail("the worker closed its device before the snapshot's copy was taken"));
    gate_->busy = false;
    gate_->cv.notify_all();
    return units;
  }

 private:
  std::shared_ptr<Trainer::SnapshotGate> gate_;
  bool taken_ = false;  // under gate_->mu
};

Trainer::Trainer(zmq::context_t& ctx, TrainSpec spec, DeviceFactory cuda)
    : ctx_(ctx),
      spec_(std::move(spec)),
      cuda_(std::move(cuda)),
      snapshot_gate_(std::make_shared<SnapshotGate>()),
      sparse_(ctx) {}

// A snapshot's units taken from now on fail; one being taken finishes first (the lock).
Trainer::~Trainer() {
  std::lock_guard<std::mutex> lock(snapshot_gate_->mu);
  snapshot_gate_->device = nullptr;
}

// "cuda:N" opens GPU N; any other device is the host's.
Status Trainer::open_device() {
  const std::string& dev = spec_.device;
  if (dev.rfind("cuda:", 0) != 0) return {};
  auto n = parse_uint(dev.substr(5));
  if (!n || *n >= uint64_t(kMaxDevicesPerNode)) return fail("device '", dev, "' is not cuda:N");
  if (!cuda_)
    return fail("device ", dev, ": this build of salamander has no CUDA path (nvcc was not found when it was built)");
  auto d = cuda_(int(*n), DeviceOptions{spec_.optim, spec_.snapshots});
  if (!d) return d.error();  // it names the device
  device_ = std::move(*d);
  std::lock_guard<std::mutex> lock(snapshot_gate_->mu);
  snapshot_gate_->device = device_.get();
  return {};
}

Status Trainer::init() {
  SAL_TRY(open_device());
  kernels::cpu::set_threads(spec_.threads);
  auto c = model::Corpus::load(spec_.data_path, spec_.data_format, spec_.dims.vocab, spec_.dims.seq_len);
  if (!c) return c.error();
  corpus_ = std::move(*c);
  params_ = model::Params::create(spec_.dims, spec_.seed, {});
  spdlog::info("corpus {}: {} tokens; {} non-expert parameters", corpus_.description(), corpus_.size(),
               params_.parameter_count());
  return {};
}

// One of a plan's Gloo data planes (the plan's, a group's, a patch's): this rank's place in it, its
// size and its store prefix.
comm::GlooOptions Trainer::plane_options(int rank, int size, std::string prefix) const {
  comm::GlooOptions o;
  o.rank = rank;
  o.size = size;
  o.prefix = std::move(prefix);
  o.hostname = spec_.data_host;
  o.connect_timeout_ms = kConnectTimeoutMs;
  o.rendezvous_timeout_ms = kRendezvousTimeoutMs;
  o.verify_counts = false;  // the exchanges' sizes come from a schedule every rank checks it shares (gather_schedule)
  return o;
}

Status Trainer::connect(const wire::PlanUpdate& p) {
  if (p.my_rank < 0 || size_t(p.my_rank) >= p.ranks.size()) return fail("plan ", p.number(), " gives this worker no rank");
  auto store = std::atomic_load(&store_);
  if (!store || store->endpoint() != p.store) {
    comm::StoreClientOptions so;
    so.configure = wire::curve_client_hook(p.store, spec_.server_key, spec_.key_file);
    store = std::make_shared<comm::StoreClient>(ctx_, p.store, so);
    std::atomic_store(&store_, store);
  }
  if (aborting_) return fail("plan ", p.number(), ": aborted by the controller");
  auto o = plane_options(p.my_rank, int(p.ranks.size()), "plan-" + std::to_string(p.number()));
  auto c = comm::connect_gloo(o, *store);
  if (!c) return c.error().with_context("plan " + std::to_string(p.number()) + " data plane");
  std::shared_ptr<comm::Collectives> comm(std::move(*c));
  std::atomic_store(&comm_, comm);
  if (aborting_) comm->abort("aborted by the controller");  // an abort that came while connecting
  rank_ = p.my_rank;
  ranks_ = int(p.ranks.size());
  if (auto s = choose_device_plane(*comm, o.prefix); !s)
    return s.error().with_context("plan " + std::to_string(p.number()) + " data plane: the ranks' devices");
  return connect_group(p);
}

namespace {

// FNV-1a over a list of device keys (each with its terminator): what identifies a device plane's
// ranks and GPUs in the vote; never 0, which means "no plane".
uint64_t keys_hash(const std::vector<std::string>& keys) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& k : keys)
    for (size_t i = 0; i <= k.size(); ++i) h = (h ^ uint8_t(i < k.size() ? k[i] : 0)) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

}  // namespace

// Every rank's device_key() (empty on a CPU worker) and what device plane it holds ready (the hash
// of that plane's keys; 0: none), all-gathered in one collective of fixed-size records. Every rank
// takes part, so all decide alike: a device plane when every rank has a GPU of its own, and the
// one the devices hold when every rank holds it, ready, for these very keys.
Status Trainer::choose_device_plane(comm::Collectives& c, const std::string& prefix) {
  const std::vector<std::string> held = std::exchange(plane_keys_, {});  // set again once the plan is in place
  device_prefix_.clear();
  reuse_plane_ = false;
  plan_keys_.clear();
  if (c.size() < 2) return {};
  constexpr size_t kKey = 64, kRecord = kKey + sizeof(uint64_t);
  std::string mine = device_ ? device_->device_key() : std::string();
  if (mine.size() >= kKey) return fail("device key '", mine, "' is longer than ", kKey - 1, " characters");
  const uint64_t ready = !held.empty() && device_ && device_->device_plane_ready() ? keys_hash(held) : 0;
  mine.resize(kKey, '\0');
  mine.append(reinterpret_cast<const char*>(&ready), sizeof ready);
  std::string all(kRecord * size_t(c.size()), '\0');
  SAL_TRY(c.allgather(mine.data(), kRecord, all.data()));
  std::vector<std::string> keys;
  std::vector<uint64_t> planes(size_t(c.size()));
  for (size_t r = 0; r < size_t(c.size()); ++r) {
    keys.emplace_back(all.c_str() + r * kRecord);
    std::memcpy(&planes[r], all.data() + r * kRecord + kKey, sizeof(uint64_t));
  }
  if (!all_own_devices(keys)) return {};
  const uint64_t want = keys_hash(keys);
  device_prefix_ = prefix + "/device";
  reuse_plane_ = std::all_of(planes.begin(), planes.end(), [want](uint64_t h) { return h == want; });
  plan_keys_ = std::move(keys);
  return {};
}

namespace {

// A unit on the wire: weights, then Adam's first and second moments.
std::vector<float> pack_unit(const model::Unit& u) {
  std::vector<float> buf(u.w);
  buf.insert(buf.end(), u.m.begin(), u.m.end());
  buf.insert(buf.end(), u.v.begin(), u.v.end());
  return buf;
}

}  // namespace

void Trainer::install_unit(model::UnitId id, const std::vector<float>& buf) {
  size_t n = buf.size() / 3;
  model::Unit u;
  u.id = id;
  u.w.assign(buf.begin(), buf.begin() + long(n));
  u.m.assign(buf.begin() + long(n), buf.begin() + long(2 * n));
  u.v.assign(buf.begin() + long(2 * n), buf.end());
  u.g.assign(n, 0.0f);
  switch (id.kind) {
    case model::UnitKind::embedding: params_.embedding = std::move(u); break;
    case model::UnitKind::dense: params_.dense[size_t(id.layer)] = std::move(u); break;
    case model::UnitKind::gate: params_.gate[size_t(id.layer)] = std::move(u); break;
    case model::UnitKind::expert: params_.experts[{id.layer, id.expert}] = std::move(u); break;
  }
}

namespace {

model::Unit* find_unit(model::Params& p, model::UnitId id) {
  switch (id.kind) {
    case model::UnitKind::embedding: return &p.embedding;
    case model::UnitKind::dense: return id.layer >= 0 && size_t(id.layer) < p.dense.size() ? &p.dense[size_t(id.layer)] : nullptr;
    case model::UnitKind::gate: return id.layer >= 0 && size_t(id.layer) < p.gate.size() ? &p.gate[size_t(id.layer)] : nullptr;
    case model::UnitKind::expert: return p.expert(id.layer, id.expert);
  }
  return nullptr;
}

}  // namespace

// Every send and receive of the plan's transfers is posted at once (tag = the transfer's index),
// so no rank waits on another's order and all owners send in parallel.
Status Trainer::migrate(const wire::PlanUpdate& p) {
  std::vector<std::vector<float>> out, in;
  std::vector<comm::SendSpec> sends;
  std::vector<comm::RecvSpec> recvs;
  std::vector<model::UnitId> incoming;
  out.reserve(p.transfers.size());
  in.reserve(p.transfers.size());
  for (size_t i = 0; i < p.transfers.size(); ++i) {
    const auto& t = p.transfers[i];
    model::UnitId id{model::UnitKind(t.kind), t.layer, t.expert};
    if (t.kind > uint8_t(model::UnitKind::expert)) return fail("plan ", p.number(), ": transfer ", i, " has unit kind ", int(t.kind));
    if (int(t.from) == rank_ && int(t.to) == rank_) continue;
    if (int(t.from) == rank_) {
      model::Unit* u = find_unit(params_, id);
      if (!u) return fail("plan ", p.number(), " asks rank ", rank_, " to send ", id.name(), ", which it does not hold");
      out.push_back(pack_unit(*u));
      sends.push_back({int(t.to), out.back().data(), out.back().size() * sizeof(float), uint32_t(i)});
    } else if (int(t.to) == rank_) {
      in.emplace_back(3 * model::unit_size(spec_.dims, id.kind));
      recvs.push_back({int(t.from), in.back().data(), in.back().size() * sizeof(float), uint32_t(i)});
      incoming.push_back(id);
    }
  }
  if (sends.empty() && recvs.empty()) return {};
  faults_->at(wire::FaultPoint::migration, p.step);
  if (auto s = comm_->exchange(sends, recvs); !s)
    return s.error().with_context("moving " + std::to_string(sends.size()) + " units out and " +
                                  std::to_string(recvs.size()) + " in");
  for (size_t i = 0; i < incoming.size(); ++i) install_unit(incoming[i], in[i]);
  return {};
}

// The dense-checkpoint fallback: everything this rank holds under the plan comes from the
// checkpoint written at p.step (or from the seed, for step 0); nothing of the old state is kept.
Status Trainer::restore(const wire::PlanUpdate& p) {
  model::Params fresh = model::Params::create(spec_.dims, spec_.seed, {});
  auto load = [&](model::UnitId id) -> Result<model::Unit> {
    if (p.restore_dir.empty()) return model::make_unit(spec_.dims, id, spec_.seed);
    uint64_t written = 0;
    auto u = ckpt::read_unit(ckpt::unit_file(p.restore_dir, id), spec_.dims, &written);
    if (!u) return u.error().with_context("restoring plan " + std::to_string(p.number()));
    if (written != p.step)
      return fail(ckpt::unit_file(p.restore_dir, id), ": written at step ", written, ", the restore needs step ", p.step);
    return u;
  };
  for (model::Unit* u : fresh.non_expert_units()) {
    auto loaded = load(u->id);
    if (!loaded) return loaded.error();
    *u = std::move(*loaded);
  }
  for (auto [l, e] : std::set<std::pair<int, int>>(held_.begin(), held_.end())) {
    auto loaded = load({model::UnitKind::expert, l, e});
    if (!loaded) return loaded.error();
    fresh.experts[{l, e}] = std::move(*loaded);
  }
  params_ = std::move(fresh);
  return {};
}

std::set<UnitId> Trainer::units_held() const {
  std::set<UnitId> out;
  for (const UnitId& id : model_units(spec_.dims))
    if (id.kind != UnitKind::expert) out.insert(id);
  for (auto [l, e] : held_) out.insert(UnitId{UnitKind::expert, l, e});
  return out;
}

Status Trainer::restore_from_peers(const wire::PlanUpdate& p) {
  auto got = fetch_window(ctx_, p, units_held(), spec_.dims, {spec_.key_file, spec_.slice_mac_key}, kFetchTimeoutMs,
                         plan_notes_);
  if (!got) return got.error().with_context("restoring plan " + std::to_string(p.number()) + " from peers");
  model::Params fresh = model::Params::create(spec_.dims, spec_.seed, held_);
  auto replay = ckpt::WindowReplay::begin(std::move(got->slots), fresh);
  if (!replay) return replay.error().with_context("restoring plan " + std::to_string(p.number()) + " from peers");
  params_ = std::move(fresh);
  spdlog::info("plan {}: {} units ({} bytes) loaded from the sparse window {}..{} in peers' memory", p.number(),
               units_held().size(), got->bytes, replay->from(), replay->to());
  if (!replay->done()) replay_ = std::move(*replay);
  return {};
}

void Trainer::keep_only(const std::vector<std::pair<int, int>>& held) {
  for (auto it = params_.experts.begin(); it != params_.experts.end();)
    it = std::find(held.begin(), held.end(), it->first) == held.end() ? params_.experts.erase(it) : std::next(it);
}

// Units the new plan does not give this rank are dropped only when its first step runs: if the
// switch fails somewhere, the controller falls back on the previous plan's holdings, which are
// then still all here.
Status Trainer::apply_plan(const wire::PlanUpdate& p) {
  const plan::Plan& plan = p.plan;
  if (plan.nodes != p.ranks.size())
    return fail("plan ", p.number(), " has ", plan.nodes, " positions for ", p.ranks.size(), " ranks");
  if (plan.experts != uint32_t(spec_.dims.experts))
    return fail("plan ", p.number(), " places ", plan.experts, " experts; the model has ", spec_.dims.experts);
  SAL_TRY(plan::check_shape(plan, size_t(spec_.dims.layers)));
  SAL_TRY(plan::check_groups(plan));
  plan_ = 0;
  plan_times_ = {};
  plan_notes_.clear();
  sparse_.wait();  // the snapshot thread may still be copying the units this plan moves
  if (p.restore) replay_.reset();
  const bool keep = device_keeps(p);
  if (device_) {
    have_grads_ = false;  // the device's gradients belong to the parameters about to be replaced
    // connect() replaces the Collectives the device's exchange refers to: let go of it first
    if (auto s = device_->set_plan({}); !s)
      return s.error().with_context("plan " + std::to_string(p.number()));
    if (!keep)
      if (auto s = sync_host(); !s) return s.error().with_context("plan " + std::to_string(p.number()));
  }
  int64_t t0 = mono_ns();
  SAL_TRY(connect(p));
  plan_times_.connect_ms = double(mono_ns() - t0) / 1e6;
  replicas_.clear();
  for (const auto& layer : plan.layers) replicas_.push_back(plan::replica_counts(layer, plan.experts));
  held_ = plan::held_by(plan, uint32_t(rank_));
  shared_ = shared_experts(replicas_);
  role_ = group_role(plan, replicas_, rank_);
  group_now_ = role_.groups > 1 ? int64_t(role_.span.group) : -1;
  backup_ok_ = false;
  if (role_.groups > 1)
    spdlog::info("plan {}: rank {} in group {} of {} (ranks {}..{}), computing shard types [{}]", p.number(), rank_,
                 role_.span.group, role_.groups, role_.span.first, role_.span.first + role_.span.count - 1,
                 fmt::join(role_.types, ", "));
  int64_t t1 = mono_ns();
  if (p.restore && p.restore_window >= 0) {
    SAL_TRY(restore_from_peers(p));
    if (device_ && replay_) {  // the CUDA model has no frozen operators yet: only a window of one slot
      replay_.reset();
      return fail("plan ", p.number(), ": the window from iteration ", p.restore_window, " must be replayed with frozen "
                  "operators, which a GPU worker cannot run yet (", spec_.device, ")");
    }
  } else if (p.restore) {
    SAL_TRY(restore(p));
  } else {
    SAL_TRY(migrate(p));
  }
  plan_times_.migrate_ms = double(mono_ns() - t1) / 1e6;
  for (auto [l, e] : held_) {
    if (params_.expert(l, e)) continue;
    if (p.step > 0)
      return fail("plan ", p.number(), " gives rank ", rank_, " layer ", l, " expert ", e, " at step ", p.step,
                  " but no transfer brings its state");
    params_.experts.emplace(std::pair{l, e}, model::make_unit(spec_.dims, {model::UnitKind::expert, l, e}, spec_.seed));
  }
  if (device_) {
    int64_t t2 = mono_ns();
    if (!keep) {
      device_held_.clear();
      if (auto s = device_->load(params_, held_); !s) return s.error().with_context("plan " + std::to_string(p.number()));
      device_held_ = std::set<std::pair<int, int>>(held_.begin(), held_.end());
    }
    int64_t t3 = mono_ns();
    plan_times_.migrate_ms += double(t3 - t2) / 1e6;  // the upload
    // comm_ and store_ stay this plan's until the next apply_plan(), which lets go of them above first
    DevicePlan dp;
    dp.comm = comm_.get();
    dp.replicas = replicas_;
    dp.before_alltoall = [this] { faults_->at(wire::FaultPoint::alltoall, step_); };
    dp.device_prefix = device_prefix_;
    dp.store = store_.get();
    dp.reuse_device_plane = reuse_plane_;
    if (auto s = device_->set_plan(dp); !s) return s.error().with_context("plan " + std::to_string(p.number()));
    plane_keys_ = plan_keys_;
    plan_times_.connect_ms += double(mono_ns() - t3) / 1e6;  // mostly the device plane's connect, if any
  }
  plan_ = p.number();
  steps_seen_ = p.step;
  pruned_ = false;
  have_grads_ = false;
  {
    SliceRoute route{p.ranks[size_t(rank_)].node, p.ranks[size_t(rank_)].index, p.number(), {}, spec_.key_file,
                     spec_.slice_mac_key};
    if (size_t(rank_) < p.slice_peers.size())
      for (uint32_t node : p.slice_peers[size_t(rank_)].nodes)
        for (const auto& sn : p.slice_nodes)
          if (sn.node == node) route.peers.push_back(sn);
    sparse_.start(plan.schedule, std::move(route));
  }
  return {};
}

// A plan that gives this rank the experts its device holds, moves no unit to or from it and
// restores nothing leaves the device's parameters as they are: no download, no upload (the host
// Params stay behind until something needs them, as after commits). Called after the placement's
// shape is checked.
bool Trainer::device_keeps(const wire::PlanUpdate& p) const {
  if (!device_ || device_held_.empty() || p.restore || p.my_rank < 0 || size_t(p.my_rank) >= p.ranks.size())
    return false;
  for (const auto& t : p.transfers)
    if (t.from != t.to && (int(t.from) == p.my_rank || int(t.to) == p.my_rank)) return false;
  auto held = plan::held_by(p.plan, uint32_t(p.my_rank));
  return std::set<std::pair<int, int>>(held.begin(), held.end()) == device_held_;
}

Status Trainer::sync_gradients() {
  faults_->at(wire::FaultPoint::allreduce, step_);
  if (ranks_ <= 1) return {};
  // every non-expert unit over every rank, then each expert held by two or more ranks among its
  // holders only
  SAL_TRY(sum_dense_gradients(*comm_, params_));
  return reduce_among_holders(*comm_, rank_, shared_, params_);
}

Result<double> Trainer::global_norm() { return grad_norm(*comm_, replicas_); }

// sqrt(sum of squares over every unit of the model, each expert once: `replicas` says how many of
// comm's ranks hold it).
Result<double> Trainer::grad_norm(comm::Collectives& comm, const std::vector<Counts>& replicas) {
  double dense = model::grad_sum_squares(params_.embedding);
  for (size_t l = 0; l < params_.dense.size(); ++l)
    dense += model::grad_sum_squares(params_.dense[l]) + model::grad_sum_squares(params_.gate[l]);
  double experts = 0;
  for (const auto& [key, u] : params_.experts) {
    const auto& holders = replicas[size_t(key.first)][size_t(key.second)];
    double h = double(std::count_if(holders.begin(), holders.end(), [](uint32_t x) { return x > 0; }));
    experts += model::grad_sum_squares(u) / std::max(h, 1.0);
  }
  if (comm.size() > 1) SAL_TRY(comm.allreduce_sum(&experts, 1));
  return std::sqrt(dense + experts);
}

Result<StepOutcome> Trainer::step(uint64_t step) {
  if (!comm_ || plan_ == 0) return fail("no plan applied");
  if (!pruned_) {
    sparse_.wait();
    keep_only(held_);
    pruned_ = true;
  }
  int64_t t0 = mono_ns();
  if (!device_) params_.zero_grads();  // a GPU worker's gradients live on the device
  have_grads_ = false;
  step_ = step;
  if (role_.groups > 1) return grouped_step(step, t0);
  auto [first, count] = model::batch_share(spec_.global_batch, ranks_, rank_);
  model::Batch b = model::make_batch(corpus_, spec_.seed, step, first, count, spec_.dims.seq_len);
  faults_->at(wire::FaultPoint::forward, step);
  if (device_) return device_step(step, b, t0);
  DistributedExchange ex(*comm_, params_, replicas_);
  ex.before_alltoall = [this, step] { faults_->at(wire::FaultPoint::alltoall, step); };
  ex.before_backward = [this, step] { faults_->at(wire::FaultPoint::backward, step); };
  model::MoeGpt m(params_);
  auto stats = m.step(b, int64_t(spec_.global_batch) * spec_.dims.seq_len, ex);
  if (!stats) return stats.error().with_context("step " + std::to_string(step));
  if (auto s = sync_gradients(); !s) return s.error().with_context("gradient sync");
  auto norm = global_norm();
  if (!norm) return norm.error();
  // a replayed iteration clips with the norm the run had (frozen operators add no gradient here)
  last_norm_ = replay_ ? replay_->norm_for(step).value_or(*norm) : *norm;
  have_grads_ = true;
  return StepOutcome{std::move(*stats), last_norm_, double(mono_ns() - t0) / 1e6,
                     model::learning_rate(spec_.optim, int64_t(step))};
}

// The CPU step's collectives in the same order: the exchange's (the all-to-all fault point is
// its before_alltoall hook, set_plan's), then the gradient sync, then the norm's all-reduce. With
// one rank every expert is local and the gradients are final, so the norm is the device's over
// every unit it holds.
Result<StepOutcome> Trainer::device_step(uint64_t step, const model::Batch& b, int64_t t0) {
  if (auto s = device_->zero_grads(); !s) return s.error().with_context("step " + std::to_string(step));
  auto stats = device_->step(b, int64_t(spec_.global_batch) * spec_.dims.seq_len);
  if (!stats) return stats.error().with_context("step " + std::to_string(step));
  faults_->at(wire::FaultPoint::allreduce, step);  // with one rank nothing to synchronise, but a drill may stop here
  if (ranks_ > 1)
    if (auto s = device_->sync_gradients(shared_); !s) return s.error().with_context("gradient sync");
  auto norm = device_->grad_norm();
  if (!norm) return norm.error().with_context("step " + std::to_string(step) + " gradient norm");
  last_norm_ = *norm;
  have_grads_ = true;
  return StepOutcome{std::move(*stats), *norm, double(mono_ns() - t0) / 1e6,
                     model::learning_rate(spec_.optim, int64_t(step))};
}

Status Trainer::commit(uint64_t step) {
  if (!have_grads_ || step != step_) return {};  // nothing of that step to apply (a late or stale commit)
  steps_seen_ = step + 1;
  double lr = model::learning_rate(spec_.optim, int64_t(step));
  if (device_) {
    have_grads_ = false;
    device_newer_ = true;  // even a failed update may have changed some units
    if (auto s = device_->update(lr, model::clip_scale(spec_.optim, last_norm_), int64_t(step) + 1); !s)
      return s.error().with_context("step " + std::to_string(step) + " update on " + spec_.device);
    device_sparse_slot(step);
    return {};
  }
  sparse_.wait();  // the last slot's copy may still be reading the weights
  model::apply_adamw(params_, spec_.optim, lr, model::clip_scale(spec_.optim, last_norm_), int64_t(step) + 1);
  have_grads_ = false;
  if (replay_) {
    if (auto s = replay_->after(step, params_); !s) return s.error().with_context("replaying step " + std::to_string(step));
    if (replay_->done()) {
      spdlog::info("the sparse window is replayed: every operator active from step {}", step + 1);
      replay_.reset();
    }
  }
  if (sparse_.takes_slot(step)) sparse_.after_commit(step, last_norm_, spec_.dims, units_written(1));
  return {};
}

// A GPU worker's sparse slot: the slot's units copied off the device on its copy stream (after a
// dense snapshot's copy, if one is in flight), the snapshot thread waiting for them.
void Trainer::device_sparse_slot(uint64_t step) {
  if (!sparse_.takes_slot(step)) return;
  std::vector<UnitId> written;
  for (const model::Unit* u : units_written(1)) written.push_back(u->id);
  auto ids = sparse_.slot_units(step, spec_.dims, written);
  if (ids.empty()) return;
  auto copy = device_snapshot(ids);
  if (!copy) return spdlog::warn("the sparse snapshot slot of step {}: {}", step, copy.error().message());
  sparse_.after_commit_copied(step, last_norm_, spec_.dims, std::move(*copy));
}

void Trainer::discard() {
  have_grads_ = false;
  if (device_) {
    if (auto s = device_->zero_grads(); !s) spdlog::warn("discarding the step's gradients: {}", s.error().message());
    return;
  }
  params_.zero_grads();
}

Status Trainer::sync_host() {
  if (!device_ || !device_newer_) return {};
  if (auto s = device_->store(params_); !s) return s.error().with_context("bringing the host parameters up to date");
  device_newer_ = false;
  return {};
}

// A unit is written by the first `copies` of its holders in rank order: the dense units (every
// rank holds them) by ranks 0 .. copies-1, an expert by the lowest ranks holding a replica.
std::vector<const model::Unit*> Trainer::units_written(size_t copies) const {
  std::vector<const model::Unit*> out;
  if (size_t(rank_) < copies) {
    out.push_back(&params_.embedding);
    for (size_t l = 0; l < params_.dense.size(); ++l) {
      out.push_back(&params_.dense[l]);
      out.push_back(&params_.gate[l]);
    }
  }
  for (auto [l, e] : std::set<std::pair<int, int>>(held_.begin(), held_.end())) {
    const auto& holders = replicas_[size_t(l)][size_t(e)];
    size_t before = 0;  // holders of a lower rank
    for (int r = 0; r < rank_ && r < int(holders.size()); ++r) before += holders[size_t(r)] > 0;
    auto it = params_.experts.find({l, e});
    if (before < copies && it != params_.experts.end()) out.push_back(&it->second);
  }
  return out;
}

std::vector<const model::Unit*> Trainer::checkpoint_share() const { return units_written(1); }

Result<ckpt::SnapshotUnits> Trainer::snapshot_share() {
  if (device_) {
    std::vector<model::UnitId> ids;
    for (const model::Unit* u : units_written(kSnapshotCopies)) ids.push_back(u->id);
    return device_snapshot(ids);
  }
  auto out = std::make_shared<std::vector<model::Unit>>();
  for (const model::Unit* u : units_written(kSnapshotCopies)) {
    model::Unit c;
    c.id = u->id;
    c.w = u->w;
    c.m = u->m;
    c.v = u->v;
    out->push_back(std::move(c));
  }
  return ckpt::SnapshotUnits([out]() -> Result<std::vector<model::Unit>> { return std::move(*out); });
}

ckpt::SnapshotUnits Trainer::with_snapshot_fault(ckpt::SnapshotUnits units, uint64_t step) const {
  return [faults = faults_, units = std::move(units), step]() {
    faults->at(wire::FaultPoint::snapshot, step);
    return units();
  };
}

// The host Params are not involved (nor brought up to date): only the unit ids come from them,
// and the device holds the same units (apply_plan loaded them).
Result<ckpt::SnapshotUnits> Trainer::device_snapshot(const std::vector<model::UnitId>& ids) {
  {
    std::unique_lock<std::mutex> lock(snapshot_gate_->mu);
    snapshot_gate_->cv.wait(lock, [this] { return !snapshot_gate_->busy; });
    snapshot_gate_->busy = true;
  }
  if (auto s = device_->begin_snapshot(ids); !s) {
    std::lock_guard<std::mutex> lock(snapshot_gate_->mu);
    snapshot_gate_->busy = false;
    snapshot_gate_->cv.notify_all();
    return s.error().with_context("snapshot on " + spec_.device);
  }
  auto pending = std::make_shared<PendingSnapshot>(snapshot_gate_);
  return ckpt::SnapshotUnits([pending] { return pending->take(); });
}

// Each rank writes its share, with no collective (a stop saves after aborting the step in flight,
// whose data plane is then spent); the controller writes the manifest once every rank has
// answered, so a checkpoint with a manifest is complete.
Result<uint32_t> Trainer::save(const std::string& dir, uint64_t step) {
  if (plan_ == 0) return fail("no plan applied");
  SAL_TRY(sync_host());
  SAL_TRY(make_dirs(dir));
  uint32_t written = 0;
  for (const model::Unit* u : checkpoint_share()) {
    SAL_TRY(ckpt::write_unit(dir, *u, step));
    ++written;
  }
  return written;
}

void Trainer::abort(const std::string& why) {
  aborting_ = true;
  if (auto s = std::atomic_load(&store_)) s->interrupt();
  if (auto c = std::atomic_load(&comm_)) c->abort(why);
  if (auto c = std::atomic_load(&group_comm_)) c->abort(why);
  if (device_) device_->abort(why);  // set once in init(), before any abort can come
}

void Trainer::clear_abort() {
  aborting_ = false;
  if (auto s = std::atomic_load(&store_)) s->clear_interrupt();
  if (device_) device_->clear_abort();
}

}  // namespace sal::runtime

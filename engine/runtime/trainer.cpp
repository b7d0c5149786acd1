// trainer.cpp — see trainer.h: opening the compute, applying a plan, the step, commit and discard,
// snapshots and saves, and the controller's abort. Moving units is in trainer_state.cpp, the data-
// parallel groups and SPARe's patch in trainer_groups.cpp.
#include "runtime/trainer.h"

#include "runtime/micro_batches.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "ckpt/format.h"
#include "comm/gloo_collectives.h"
#include "core/clock.h"
#include "core/devices.h"
#include "core/paths.h"
#include "core/strings.h"
#include "kernels/cpu/ops.h"
#include "model/optimizer.h"
#include "plan/plan.h"
#include "runtime/on_device.h"
#include "runtime/on_host.h"
#include "wire/curve.h"

namespace sal::runtime {

// A plan's data planes. A pair connect to a peer that never comes costs a few times kConnectTimeoutMs
// (Gloo's pair connect cannot be interrupted), so it is short: the controller retries a failed
// plan. The waits for the peers' rendezvous keys are longer — an abort interrupts them — so that
// a peer still leaving an abandoned plan's pair connects arrives in time.
constexpr int64_t kConnectTimeoutMs = 1000;
constexpr int64_t kRendezvousTimeoutMs = 8000;

namespace {

double ms_since(int64_t t0) { return double(mono_ns() - t0) / 1e6; }
double ms_of(int64_t ns) { return double(ns) / 1e6; }

Status in_plan(Status s, const wire::PlanUpdate& p) {
  if (!s) return s.error().with_context("plan " + std::to_string(p.number()));
  return {};
}

}  // namespace

Trainer::Trainer(zmq::context_t& ctx, TrainSpec spec, DeviceFactory cuda)
    : ctx_(ctx), spec_(std::move(spec)), cuda_(std::move(cuda)), sparse_(slices_ctx_) {}

Trainer::~Trainer() = default;

namespace {

// "cuda:N" is GPU N; any other device is the host's.
bool host_device(const std::string& dev) { return dev.rfind("cuda:", 0) != 0; }

}  // namespace

Status Trainer::open_compute() {
  const std::string& dev = spec_.device;
  if (host_device(dev)) {
    compute_ = std::make_unique<OnHost>(params_, spec_.optim);
    return {};
  }
  auto n = parse_uint(dev.substr(5));
  if (!n || *n >= uint64_t(kMaxDevicesPerNode)) return fail("device '", dev, "' is not cuda:N");
  if (!cuda_)
    return fail("device ", dev, ": this build of salamander has no CUDA path (nvcc was not found when it was built)");
  auto d = cuda_(int(*n), DeviceOptions{spec_.optim, spec_.snapshots});
  if (!d) return d.error();  // it names the device
  compute_ = std::make_unique<OnDevice>(std::move(*d), params_, dev);
  return {};
}

Status Trainer::init() {
  SAL_TRY(open_compute());
  kernels::cpu::set_threads(spec_.threads);
  auto c = model::Corpus::load(spec_.data_path, spec_.data_format, spec_.dims.vocab, spec_.dims.seq_len);
  if (!c) return c.error();
  corpus_ = std::move(*c);
  SAL_TRY(corpus_.hold_out(spec_.validation, spec_.dims.seq_len));
  if (!spec_.routing_trace.empty()) {
    auto t = model::RoutingTrace::load(spec_.routing_trace, spec_.dims.layers, spec_.dims.experts, spec_.routing_every);
    if (!t) return t.error().with_context("model.routing_trace");
    routing_ = std::make_unique<model::RoutingTrace>(std::move(*t));
    spdlog::info("routing replayed from {} ({}; {} recorded steps, each replayed for {} steps)", spec_.routing_trace,
                 routing_->source(), routing_->files(), spec_.routing_every);
  }
  params_ = model::Params::create(spec_.dims, spec_.seed, {});
  spdlog::info("corpus {}: {} tokens; {} non-expert parameters", corpus_.description(), corpus_.size(),
               params_.parameter_count());
  return {};
}

bool Trainer::warms_up() const { return spec_.warm_up_sequences > 0 && host_device(spec_.device); }

Result<WarmUpDone> Trainer::warm_up(const std::function<bool()>& stop) const {
  return runtime::warm_up(spec_, corpus_, stop);
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

// ---------- applying a plan ----------

// Units the new plan does not give this rank are dropped only when its first step runs: if the
// switch fails somewhere, the controller falls back on the previous plan's holdings, which are
// then still all here.
Status Trainer::apply_plan(const wire::PlanUpdate& p) {
  applying_ = p.number();
  Status s = switch_to(p);
  applying_ = 0;
  return s;
}

bool Trainer::keeps(const wire::PlanUpdate& p, const std::shared_ptr<comm::Collectives>& held, const PlaneOf& of,
                    const PlaneOf& want) {
  return p.keep_planes_of != 0 && held && !held->aborted() && of == want;
}

Status Trainer::switch_to(const wire::PlanUpdate& p) {
  SAL_TRY(still_wanted(p));
  SAL_TRY(check_plan(p));
  const int64_t left = mono_ns();
  SAL_TRY(leave_plan(p));
  plan_times_.leave_ms = ms_since(left);
  int64_t t0 = mono_ns();
  SAL_TRY(connect(p));
  plan_times_.connect_ms = ms_since(t0);
  take_roles(p);
  SAL_TRY(still_wanted(p));
  int64_t t1 = mono_ns();
  const bool current = state_step_ == p.step;
  state_step_.reset();  // until the switch is done: abandoned half way, the state is of no one step
  SAL_TRY(move_state(p, current));
  plan_times_.migrate_ms = ms_since(t1);
  SAL_TRY(still_wanted(p));
  SAL_TRY(load_compute(p));
  start_snapshots(p);
  start_standby(p);
  return {};
}

Status Trainer::still_wanted(const wire::PlanUpdate& p) const {
  if (abandoned(p.number())) return fail("plan ", p.number(), " was abandoned by the controller");
  return {};
}

void Trainer::abandon(uint64_t plan, const std::string& why) {
  uint64_t seen = abandoned_.load();
  while (plan > seen && !abandoned_.compare_exchange_weak(seen, plan)) {
  }
  const uint64_t now = applying_.load();
  if (now != 0 && now <= plan) abort("plan " + std::to_string(plan) + " abandoned: " + why);
}

Status Trainer::check_plan(const wire::PlanUpdate& p) const {
  const plan::Plan& plan = p.plan;
  if (plan.nodes != p.ranks.size())
    return fail("plan ", p.number(), " has ", plan.nodes, " positions for ", p.ranks.size(), " ranks");
  if (plan.experts != uint32_t(spec_.dims.experts))
    return fail("plan ", p.number(), " places ", plan.experts, " experts; the model has ", spec_.dims.experts);
  SAL_TRY(plan::check_shape(plan, size_t(spec_.dims.layers)));
  return plan::check_groups(plan);
}

// Nothing of the plan in force is trusted until this one is applied: the snapshot thread lets go
// of the units this plan moves, the compute of the Collectives connect() replaces (its gradients
// belong to the parameters about to change), and the host Params are brought up to date unless
// the compute keeps what it holds: every unit, or, where the plan only moves experts, the units
// this rank sends away.
Status Trainer::leave_plan(const wire::PlanUpdate& p) {
  plan_ = 0;
  last_patch_.reset();
  writers_absent_.clear();
  plan_times_ = {};
  plan_notes_.clear();
  have_grads_ = false;
  sparse_.wait();
  if (p.restore) replay_.reset();
  keep_ = compute_keeps(p);
  moves_only_ = !keep_ && moves_experts_only(p);
  SAL_TRY(in_plan(compute_->release(), p));
  spent_plane_.reset();  // the compute names no plane now
  if (!keep_) SAL_TRY(in_plan(moves_only_ ? compute_->to_host(units_sent(p)) : compute_->to_host(), p));
  return {};
}

// A plan that restores nothing, rebuilds nothing and brings this rank no non-expert unit: what
// the compute holds stays right for every unit the plan leaves here.
bool Trainer::moves_experts_only(const wire::PlanUpdate& p) const {
  if (p.restore || p.rebuild_window >= 0 || p.my_rank < 0) return false;
  for (const auto& t : p.transfers)
    if (int(t.to) == p.my_rank && int(t.from) != p.my_rank && t.kind != uint8_t(model::UnitKind::expert)) return false;
  return true;
}

std::vector<model::UnitId> Trainer::units_sent(const wire::PlanUpdate& p) const {
  std::set<model::UnitId> sent;
  for (const auto& t : p.transfers)
    if (int(t.from) == p.my_rank && int(t.to) != p.my_rank) sent.insert({model::UnitKind(t.kind), t.layer, t.expert});
  return {sent.begin(), sent.end()};
}

bool Trainer::compute_keeps(const wire::PlanUpdate& p) const {
  if (p.restore || p.my_rank < 0 || size_t(p.my_rank) >= p.ranks.size()) return false;
  for (const auto& t : p.transfers)
    if (t.from != t.to && (int(t.from) == p.my_rank || int(t.to) == p.my_rank)) return false;
  return compute_->holds(plan::held_by(p.plan, uint32_t(p.my_rank)));
}

// A client of the plan's rendezvous store (CURVE where the job has keys).
std::unique_ptr<comm::StoreClient> Trainer::store_client(const std::string& endpoint) const {
  comm::StoreClientOptions so;
  so.configure = wire::curve_client_hook(endpoint, spec_.server_key, spec_.key_file);
  return std::make_unique<comm::StoreClient>(ctx_, endpoint, so);
}

Status Trainer::connect(const wire::PlanUpdate& p) {
  const int64_t t0 = mono_ns();
  if (p.my_rank < 0 || size_t(p.my_rank) >= p.ranks.size()) return fail("plan ", p.number(), " gives this worker no rank");
  auto store = std::atomic_load(&store_);
  if (!store || store->endpoint() != p.store) {
    store = store_client(p.store);
    std::atomic_store(&store_, store);
  }
  if (aborting_) return fail("plan ", p.number(), ": aborted by the controller");
  auto o = plane_options(p.my_rank, int(p.ranks.size()), wire::plan_keys(p.number()));
  plan_ranks_.clear();
  for (const auto& r : p.ranks) plan_ranks_.emplace_back(r.node, r.index);
  const PlaneOf want{p.keep_planes_of, plan_ranks_};
  std::shared_ptr<comm::Collectives> comm = std::atomic_load(&comm_);
  if (keeps(p, comm, plane_of_, want)) {
    spdlog::info("plan {} keeps the data plane of plan {}: the same {} ranks", p.number(), p.keep_planes_of,
                 p.ranks.size());
  } else {
    auto c = comm::connect_gloo(o, *store);
    if (!c) return c.error().with_context("plan " + std::to_string(p.number()) + " data plane");
    comm = std::shared_ptr<comm::Collectives>(comm::timed(std::move(*c), waits_));
    std::atomic_store(&comm_, comm);
  }
  plane_of_ = PlaneOf{p.number(), plan_ranks_};
  keep_or_retire_standby(p);
  if (aborting_) comm->abort("aborted by the controller");  // an abort that came while connecting
  rank_ = p.my_rank;
  ranks_ = int(p.ranks.size());
  const int64_t gathered = mono_ns();
  if (auto s = choose_device_plane(*comm, o.prefix); !s)
    return s.error().with_context("plan " + std::to_string(p.number()) + " data plane: the ranks' devices");
  plan_times_.devices_ms = ms_since(gathered);
  SAL_TRY(connect_group(p));
  plan_times_.planes_ms = ms_since(t0) - plan_times_.devices_ms;
  return {};
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
  std::string mine = compute_->device_key();
  if (mine.size() >= kKey) return fail("device key '", mine, "' is longer than ", kKey - 1, " characters");
  const uint64_t ready = !held.empty() && compute_->device_plane_ready() ? keys_hash(held) : 0;
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

// This rank's part of the plan: the replica table, its experts, the experts shared with other
// ranks, its data-parallel group.
void Trainer::take_roles(const wire::PlanUpdate& p) {
  const plan::Plan& plan = p.plan;
  replicas_.clear();
  for (const auto& layer : plan.layers) replicas_.push_back(plan::replica_counts(layer, plan.experts));
  holders_ = plan::expert_holders(plan);
  held_ = plan::held_by(plan, uint32_t(rank_));
  shared_ = shared_experts(replicas_);
  role_ = group_role(plan, replicas_, rank_);
  degraded_role_.reset();
  group_now_ = role_.groups > 1 ? int64_t(role_.span.group) : -1;
  backup_ok_ = false;
  const auto part = role_.even ? even_part(spec_.global_batch, role_, {}) : std::pair{0, 0};
  if (role_.groups > 1 && part.second > 0) {
    spdlog::info("plan {}: rank {} in group {} of {} (ranks {}..{}), given shard types [{}] but computing sequences "
                 "{}..{} of each step (whole types would give the groups unequal work a rank: each its even part)",
                 p.number(), rank_, role_.span.group, role_.groups, role_.span.first,
                 role_.span.first + role_.span.count - 1, fmt::join(role_.types, ", "), part.first,
                 part.first + part.second - 1);
  } else if (role_.groups > 1) {
    spdlog::info("plan {}: rank {} in group {} of {} (ranks {}..{}), computing shard types [{}]", p.number(), rank_,
                 role_.span.group, role_.groups, role_.span.first, role_.span.first + role_.span.count - 1,
                 fmt::join(role_.types, ", "));
  }
}

// The compute takes the plan's units (the upload counts as migration) and the plan's data plane
// (the device plane's connect, if any, counts as connection). comm_ and store_ stay this plan's
// until the next apply_plan(), which lets go of them first (leave_plan).
Status Trainer::load_compute(const wire::PlanUpdate& p) {
  int64_t t0 = mono_ns();
  if (!keep_) SAL_TRY(in_plan(moves_only_ ? compute_->move_experts(held_) : compute_->load(held_), p));
  plan_times_.load_ms = ms_since(t0);
  plan_times_.migrate_ms += plan_times_.load_ms;
  int64_t t1 = mono_ns();
  SAL_TRY(in_plan(compute_->set_plan(compute_plan()), p));
  plane_keys_ = plan_keys_;
  plan_times_.compute_plan_ms = ms_since(t1);
  plan_times_.connect_ms += plan_times_.compute_plan_ms;
  return {};
}

DevicePlan Trainer::compute_plan() {
  DevicePlan dp;
  dp.comm = comm_.get();
  dp.replicas = replicas_;
  dp.split = spec_.dispatch;
  dp.shadows = spec_.shadow_experts;
  dp.before_alltoall = [this] { faults_->at(wire::FaultPoint::alltoall, step_); };
  dp.before_backward = [this] { faults_->at(wire::FaultPoint::backward, step_); };
  dp.store = store_.get();
  if (role_.groups > 1) {  // the group's plane crosses host memory; no device plane for now
    dp.group = group_comm_.get();
    dp.group_replicas = role_now().replicas;
  } else {
    dp.device_prefix = device_prefix_;
    dp.reuse_device_plane = reuse_plane_;
  }
  return dp;
}

// The plan is in force here: its first step is p.step, and its schedule's slots go to its peers.
void Trainer::start_snapshots(const wire::PlanUpdate& p) {
  plan_ = p.number();
  steps_seen_ = p.step;
  if (!replay_) state_step_ = p.step;
  pruned_ = false;
  have_grads_ = false;
  SliceRoute route{p.ranks[size_t(rank_)].node, p.ranks[size_t(rank_)].index, p.number(), {}, spec_.log_copies,
                   spec_.key_file, spec_.slice_mac_key};
  slice_nodes_ = p.slice_nodes;
  if (size_t(rank_) < p.slice_peers.size()) route.peers = slice_route(p.slice_peers[size_t(rank_)]);
  // the upstream logs go where the slots go, and are rebuilt from only in a plan of one group
  compute_->log_dispatch(spec_.expert_logs && !route.peers.empty() && plan::group_count(p.plan) <= 1);
  sparse_.start(p.plan.schedule, std::move(route));
}

// ---------- the step ----------

// The exchange's collectives first (the all-to-all fault point is the compute plan's hook), then
// the gradient sync, then the norm's all-reduce.
Result<StepOutcome> Trainer::step(uint64_t step, const std::vector<uint32_t>& shares, KeptPatch kept) {
  if (!comm_ || plan_ == 0) return fail("no plan applied");
  if (!pruned_) {
    sparse_.wait();
    keep_only(held_);
    pruned_ = true;
  }
  int64_t t0 = mono_ns();
  have_grads_ = false;
  backup_ok_ = false;  // this step's own shard types: not computed yet (a patch until then runs them)
  step_ = step;
  corrupt_if_armed(step);  // a drill's corrupt{}: before the digests, as memory gone bad between steps
  std::vector<wire::UnitDigest> digests = unit_digests(step);
  if (auto s = compute_->zero_grads(); !s) return s.error().with_context("step " + std::to_string(step));
  const wire::StepPatch* patched = nullptr;  // a degraded step's patch (it spent the plan's plane)
  if (role_.groups > 1 && kept.patch) {
    auto p = kept_patch(step, kept);
    if (!p) return p.error();
    patched = *p;
  }
  auto val = validate(step, patched);
  if (!val) return val.error();
  const comm::WaitClock w0 = *waits_;
  const int64_t cpu0 = comm::thread_cpu_ns(), proc0 = comm::process_cpu_ns(), faults0 = comm::thread_page_faults();
  if (role_.groups > 1) {
    auto out = patched ? degraded_step(step, t0, *patched) : grouped_step(step, t0);
    if (out) out->times = step_times(*out, w0, cpu0, proc0, ms_of(waits_->ns - w0.ns), 0);
    if (out) out->times.page_faults = comm::thread_page_faults() - faults0;
    if (out) out->digests = std::move(digests);
    if (out) out->val_ce_sum = val->ce_sum, out->val_tokens = val->tokens;
    return out;
  }
  faults_->at(wire::FaultPoint::forward, step);
  auto stats = forward_backward(step, shares);
  if (!stats) return stats.error().with_context("step " + std::to_string(step));
  uint64_t log_bytes = 0;  // on its way while the gradients synchronise
  if (auto log = compute_->take_log()) {
    log_bytes = log->bytes();
    sparse_.put_log(step, std::move(*log));
  }
  faults_->at(wire::FaultPoint::allreduce, step);
  const int64_t w1 = waits_->ns, t1 = mono_ns();
  if (ranks_ > 1)
    if (auto s = compute_->sync_gradients(shared_); !s) return s.error().with_context("gradient sync");
  auto norm = compute_->grad_norm();
  if (!norm) return norm.error().with_context("step " + std::to_string(step) + " gradient norm");
  // a replayed iteration clips with the norm the run had (frozen operators add no gradient here)
  last_norm_ = replay_ ? replay_->norm_for(step).value_or(*norm) : *norm;
  router_load_ = stats->router_load;  // already the global batch's: every pass gathered it over every rank
  have_grads_ = true;

  StepOutcome out{std::move(*stats), last_norm_, ms_since(t0), model::learning_rate(spec_.optim, int64_t(step)), {}};
  out.times = step_times(out, w0, cpu0, proc0, ms_of(w1 - w0.ns), ms_since(t1));
  out.times.page_faults = comm::thread_page_faults() - faults0;
  out.digests = std::move(digests);
  out.val_ce_sum = val->ce_sum, out.val_tokens = val->tokens;
  out.log_bytes = log_bytes;
  if (log_bytes) sparse_.logs_sent();  // sent before the vote
  return out;
}

// This rank's share of the step's global batch (even unless weighted by `shares`), forward and
// backward, in passes of train.micro_batch sequences (runtime/micro_batches.h), the gradients adding
// up in the units.
Result<model::StepStats> Trainer::forward_backward(uint64_t step, const std::vector<uint32_t>& shares) {
  const bool weighted = shares.size() == size_t(ranks_);
  model::StepStats total;
  const auto passes = micro_passes(spec_.global_batch, shares, ranks_, rank_, spec_.micro_batch);
  for (size_t i = 0; i < passes.size(); ++i) {
    model::Batch b = model::make_batch(corpus_, spec_.seed, step, passes[i].first, passes[i].count, spec_.dims.seq_len);
    b.routing = routing_.get();
    b.aux_share = passes[i].aux_share;
    if (weighted) b.rank_shares = shares;
    auto stats = compute_->step(b, int64_t(spec_.global_batch) * spec_.dims.seq_len);
    if (!stats) return passes.size() > 1 ? stats.error().with_context("micro-batch " + std::to_string(i)) : stats.error();
    if (passes.size() == 1) return stats;
    model::add_stats(total, *stats);
  }
  return total;
}

bool Trainer::validates(uint64_t step) const {
  return spec_.eval_every > 0 && step % uint64_t(spec_.eval_every) == 0 && corpus_.validation_size() > 0;
}

// On a step of train.eval_every, before it trains: this rank's part of the validation set (an even
// share of train.eval_sequences), forward only over the plan's exchange, so the loss is that of the
// weights after `step` committed steps; in a degraded step (`kept`: the patch it keeps, which spent
// the plan's plane), over the groups up instead. Nothing otherwise (tokens 0).
Result<model::StepStats> Trainer::validate(uint64_t step, const wire::StepPatch* kept) {
  if (!validates(step)) return model::StepStats{};
  faults_->at(wire::FaultPoint::validation, step);
  if (kept) return validate_in_groups(step, kept->damaged);
  auto [first, count] = model::batch_share(spec_.eval_sequences, ranks_, rank_);
  model::Batch b = model::make_validation_batch(corpus_, spec_.seed, first, count, spec_.dims.seq_len);
  auto stats = compute_->evaluate(b, int64_t(spec_.eval_sequences) * spec_.dims.seq_len);
  if (!stats) return stats.error().with_context("step " + std::to_string(step) + " validation");
  return stats;
}

// Where the step's time went (health.h's measurements): `exchange` ms in the passes' collectives,
// `sync` ms in the gradient sync (its own computing — packing, the norm — is small: all of it counts
// as the sync's); the CPU times outside the collectives since w0/cpu0/proc0.
StepTimes Trainer::step_times(const StepOutcome& out, const comm::WaitClock& w0, int64_t cpu0, int64_t proc0,
                              double exchange, double sync) const {
  StepTimes t;
  t.busy_ms = std::max(0.0, out.compute_ms - exchange - sync);
  t.exchange_ms = exchange, t.sync_ms = sync, t.update_ms = update_ms_;
  t.busy_cpu_ms = ms_of(comm::thread_cpu_ns() - cpu0 - (waits_->thread_cpu_ns - w0.thread_cpu_ns));
  t.process_cpu_ms = ms_of(comm::process_cpu_ns() - proc0 - (waits_->process_cpu_ns - w0.process_cpu_ns));
  t.expert_cpu_ms = out.stats.expert_cpu_ms;
  return t;
}

Status Trainer::commit(uint64_t step) {
  if (!have_grads_ || step != step_) return {};  // nothing of that step to apply (a late or stale commit)
  steps_seen_ = step + 1;
  double lr = model::learning_rate(spec_.optim, int64_t(step));
  sparse_.wait();  // the last slot's copy may still be reading the weights
  have_grads_ = false;
  state_step_.reset();
  const int64_t t0 = mono_ns();
  if (auto s = compute_->update(lr, model::clip_scale(spec_.optim, last_norm_), int64_t(step) + 1); !s)
    return s.error().with_context("step " + std::to_string(step));
  if (auto s = compute_->balance_router(router_load_); !s)
    return s.error().with_context("step " + std::to_string(step) + " routing bias");
  update_ms_ = ms_since(t0);
  SAL_TRY(replayed(step));
  if (!replay_) state_step_ = step + 1;
  if (sparse_.takes_slot(step)) {
    // after a patch lost ranks, the survivors write their units from the next window on: the
    // windows of degraded steps stay complete, so a later loss can restore from them
    if (sparse_.starts_window(step)) write_without_lost();
    compute_->put_slot(sparse_, step, last_norm_, spec_.dims, units_written(1, writers_absent_));
  }
  return {};
}

// At a window's first slot after a patch lost ranks: the units this rank writes are shared out
// anew without them, and the slots go to the peers the patch named (the plan's may be lost).
void Trainer::write_without_lost() {
  auto lost = ranks_lost();
  if (lost == writers_absent_) return;
  writers_absent_ = std::move(lost);
  if (last_patch_ && size_t(rank_) < last_patch_->slice_peers.size())
    sparse_.reroute(slice_route(last_patch_->slice_peers[size_t(rank_)]));
}

std::vector<wire::SliceNode> Trainer::slice_route(const wire::SlicePeers& peers) const {
  std::vector<wire::SliceNode> out;
  for (uint32_t node : peers.nodes)
    for (const auto& sn : slice_nodes_)
      if (sn.node == node) out.push_back(sn);
  return out;
}

Status Trainer::replayed(uint64_t step) {
  if (!replay_) return {};
  // The units the next slot may load: every unit not yet complete, which is every frozen one (the
  // active ones the compute trained are left as they are, on the device too).
  std::vector<model::UnitId> loading;
  if (replay_->loads_after(step))
    for (model::Unit* u : params_.units())
      if (u->frozen) loading.push_back(u->id);
  if (auto s = replay_->after(step, params_); !s) return s.error().with_context("replaying step " + std::to_string(step));
  if (!loading.empty())
    if (auto s = compute_->refresh_units(loading); !s)
      return s.error().with_context("replaying step " + std::to_string(step));
  if (replay_->done()) {
    spdlog::info("the sparse window is replayed: every operator active from step {}", step + 1);
    replay_.reset();
  }
  return {};
}

void Trainer::discard() {
  have_grads_ = false;
  if (auto s = compute_->zero_grads(); !s) spdlog::warn("discarding the step's gradients: {}", s.error().message());
}

// ---------- snapshots and saves ----------

Result<ckpt::SnapshotUnits> Trainer::snapshot_share(const std::vector<uint32_t>& absent) {
  return compute_->snapshot(units_written(kSnapshotCopies, absent));
}

ckpt::SnapshotUnits Trainer::with_snapshot_fault(ckpt::SnapshotUnits units, uint64_t step) const {
  return [faults = faults_, units = std::move(units), step]() {
    faults->at(wire::FaultPoint::snapshot, step);
    return units();
  };
}

// Each rank writes its share, with no collective (a stop saves after aborting the step in flight,
// whose data plane is then spent); the controller writes the manifest once every rank has
// answered, so a checkpoint with a manifest is complete.
Result<uint32_t> Trainer::save(const std::string& dir, uint64_t step, const std::vector<uint32_t>& absent) {
  if (plan_ == 0) return fail("no plan applied");
  SAL_TRY(compute_->to_host());
  SAL_TRY(make_dirs(dir));
  uint32_t written = 0;
  for (const model::Unit* u : checkpoint_share(absent)) {
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
  if (compute_) compute_->abort(why);  // set once in init(), before any abort can come
}

void Trainer::clear_abort() {
  aborting_ = false;
  if (auto s = std::atomic_load(&store_)) s->clear_interrupt();
  if (compute_) compute_->clear_abort();
}

}  // namespace sal::runtime

// trainer_state.cpp — the Trainer's units (see trainer.h): moving them between ranks as a plan
// says (every send and receive posted at once over the plan's data plane), restoring them from a
// dense checkpoint, the seed or a window of sparse snapshots in peers' memory, and which of them
// this rank holds and writes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "ckpt/format.h"
#include "core/clock.h"
#include "core/strings.h"
#include "runtime/slice_fetch.h"
#include "runtime/trainer.h"

namespace sal::runtime {

// How long a restoring worker waits for one holder's answer before asking the next.
constexpr int kFetchTimeoutMs = 10000;

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
      model::Unit* u = params_.unit(id);
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
  model::Params fresh = model::Params::shaped(spec_.dims, {});
  auto load = [&](model::UnitId id) -> Result<model::Unit> {
    if (p.restore_dir.empty()) return model::make_unit(spec_.dims, id, spec_.seed);
    uint64_t written = 0;
    auto u = ckpt::read_unit(ckpt::unit_file(p.restore_dir, id), spec_.dims, &written);
    const std::string restoring = "restoring plan " + std::to_string(p.number());
    if (!u) return Error(u.error().message(), kSnapshotUnreadable).with_context(restoring);
    if (written != p.step)
      return Error(ckpt::unit_file(p.restore_dir, id) + ": written at step " + std::to_string(written) +
                       ", the restore needs step " + std::to_string(p.step),
                   kSnapshotUnreadable);
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

// A window wider than one slot leaves the replay to the steps that follow (Trainer::replayed).
// A window of one slot taken after the step this worker's state already committed (`current`: the
// survivors of a loss right after a commit, the common case with windows of one; restore_keeps: the
// controller vouches for one slot, and for the survivors' copies) is that state: the units it holds
// stay, and only those it did not hold are fetched (restore_missing).
Status Trainer::restore_from_peers(const wire::PlanUpdate& p, bool current) {
  std::set<UnitId> kept, wanted;
  const bool own_step = current && p.restore_keeps;
  for (const UnitId& id : units_held()) (own_step && params_.unit(id) ? kept : wanted).insert(id);
  if (!kept.empty()) return restore_missing(p, kept, wanted);
  auto got = fetch_from_peers(p, wanted);
  if (!got) return got.error();
  model::Params fresh = model::Params::shaped(spec_.dims, held_);  // every unit is loaded from the window
  auto replay = ckpt::WindowReplay::begin(std::move(got->slots), fresh);
  if (!replay) return replay.error().with_context("restoring plan " + std::to_string(p.number()) + " from peers");
  params_ = std::move(fresh);
  spdlog::info("plan {}: {} units ({} bytes) loaded from the sparse window {}..{} in peers' memory", p.number(),
               wanted.size(), got->bytes, replay->from(), replay->to());
  if (!replay->done()) replay_ = std::move(*replay);
  return {};
}

// The units of a window of this worker's own step that it did not hold, fetched and loaded beside
// those it keeps; an expert it no longer holds is dropped.
Status Trainer::restore_missing(const wire::PlanUpdate& p, const std::set<UnitId>& kept,
                                const std::set<UnitId>& wanted) {
  size_t bytes = 0;
  model::Params fresh = model::Params::shaped(spec_.dims, held_);
  for (model::Unit* u : fresh.units())
    if (kept.count(u->id)) {
      *u = std::move(*params_.unit(u->id));
      u->zero_grad();  // (the aborted step's, if it got that far)
    }
  if (!wanted.empty()) {
    auto got = fetch_from_peers(p, wanted);
    if (!got) return got.error();
    if (got->slots.size() != 1)
      return fail("restoring plan ", p.number(), " from peers: the window from iteration ", p.restore_window,
                  " came with ", got->slots.size(), " slots, where one was asked for");
    SAL_TRY(ckpt::load_from_slot(got->slots[0], fresh, wanted));
    bytes = got->bytes;
  }
  params_ = std::move(fresh);
  spdlog::info("plan {}: {} units ({} bytes) loaded from the sparse window {}..{} in peers' memory, {} kept: this "
               "worker's state is that iteration's", p.number(), wanted.size(), bytes, p.restore_window,
               p.restore_window, kept.size());
  return {};
}

Result<FetchedWindow> Trainer::fetch_from_peers(const wire::PlanUpdate& p, const std::set<UnitId>& units) {
  auto got = fetch_window(slices_ctx_, p, units, spec_.dims, {spec_.key_file, spec_.slice_mac_key}, kFetchTimeoutMs,
                          plan_notes_, [this] { return aborting_.load(); });
  if (!got) return got.error().with_context("restoring plan " + std::to_string(p.number()) + " from peers");
  return got;
}

namespace {

// The new plan's holders of each expert p.rebuild_holders names (lost: every holder gone), in rank
// order but for the first, which rebuilds it: the i-th lost expert's is its (i mod holders)-th
// holder, so that the replays spread over the ranks.
std::map<UnitId, std::vector<int>> new_holders(const wire::PlanUpdate& p) {
  std::map<UnitId, std::vector<int>> out;
  for (const auto& h : p.rebuild_holders)
    for (const auto& u : h.units) out[UnitId{UnitKind(u.kind), u.layer, u.expert}];
  for (uint32_t r = 0; r < p.ranks.size(); ++r)
    for (auto [l, e] : plan::held_by(p.plan, r))
      if (auto it = out.find(UnitId{UnitKind::expert, l, e}); it != out.end() &&
          (it->second.empty() || it->second.back() != int(r)))
        it->second.push_back(int(r));
  size_t i = 0;
  for (auto& [id, ranks] : out)
    if (!ranks.empty()) std::swap(ranks.front(), ranks[i++ % ranks.size()]);
  return out;
}

}  // namespace

// The experts that lost every holder (p.rebuild_window >= 0): each is rebuilt by one of its new
// holders (new_holders() says which) — loaded from its full copy in the window, then brought to iteration p.rebuild_to by
// replaying its own updates from the upstream logs of every rank that ran those iterations
// (MoEtion's upstream logging) — and sent to the others over the plan's data plane. The other
// units stay as they are: nobody rolls back.
Status Trainer::rebuild_lost(const wire::PlanUpdate& p) {
  if (p.rebuild_window < 0) return {};
  const auto holders = new_holders(p);
  std::set<UnitId> mine;
  for (const auto& [id, ranks] : holders)
    if (!ranks.empty() && ranks.front() == rank_ && !params_.unit(id)) mine.insert(id);
  SAL_TRY(rebuild_experts(p, mine));
  return share_rebuilt(p, holders);
}

// Each rebuilt expert from its rebuilder to its other new holders, every send and receive at once.
Status Trainer::share_rebuilt(const wire::PlanUpdate& p, const std::map<UnitId, std::vector<int>>& holders) {
  std::vector<std::vector<float>> out, in;
  std::vector<comm::SendSpec> sends;
  std::vector<comm::RecvSpec> recvs;
  std::vector<UnitId> incoming;
  size_t pairs = 0;
  for (const auto& [id, ranks] : holders) pairs += ranks.empty() ? 0 : ranks.size() - 1;
  out.reserve(pairs);  // the specs point into them: no reallocation
  in.reserve(pairs);
  uint32_t tag = 0;
  for (const auto& [id, ranks] : holders) {
    for (size_t k = 1; k < ranks.size(); ++k, ++tag) {
      if (ranks.front() == rank_) {
        const model::Unit* u = params_.unit(id);
        if (!u) return fail("plan ", p.number(), ": ", id.name(), " was not rebuilt here");
        out.push_back(pack_unit(*u));
        sends.push_back({ranks[k], out.back().data(), out.back().size() * sizeof(float), tag});
      } else if (ranks[k] == rank_) {
        in.emplace_back(3 * model::unit_size(spec_.dims, id.kind));
        recvs.push_back({ranks.front(), in.back().data(), in.back().size() * sizeof(float), tag});
        incoming.push_back(id);
      }
    }
  }
  if (sends.empty() && recvs.empty()) return {};
  if (auto s = comm_->exchange(sends, recvs); !s)
    return s.error().with_context("plan " + std::to_string(p.number()) + ": sharing the rebuilt experts");
  for (size_t i = 0; i < incoming.size(); ++i) install_unit(incoming[i], in[i]);
  return {};
}

// The experts `mine` (this rank rebuilds them): their copies from the window, the logs, the replay.
Status Trainer::rebuild_experts(const wire::PlanUpdate& p, const std::set<UnitId>& mine) {
  if (mine.empty()) return {};
  const std::string what = "plan " + std::to_string(p.number()) + ": rebuilding " + std::to_string(mine.size()) +
                           " lost experts from the upstream logs";
  const SliceAccess access{spec_.key_file, spec_.slice_mac_key};
  auto stop = [this] { return aborting_.load(); };
  wire::PlanUpdate from_window = p;
  from_window.restore_window = p.rebuild_window;
  from_window.restore_holders = p.rebuild_holders;
  const int64_t t0 = mono_ns();
  auto window = fetch_window(slices_ctx_, from_window, mine, spec_.dims, access, kFetchTimeoutMs, plan_notes_, stop);
  if (!window) return window.error().with_context(what);
  std::map<UnitId, std::pair<uint64_t, const ckpt::UnitCopy*>> full;  // each expert's full copy and its iteration
  for (const auto& slot : window->slots)
    for (const auto& [id, c] : slot.units)
      if (c.full) full[id] = {slot.step, &c};
  uint64_t first = p.rebuild_to + 1;
  for (const auto& [id, at] : full) first = std::min(first, at.first + 1);
  const int64_t t1 = mono_ns();
  auto logs = fetch_logs(slices_ctx_, p, mine, first, p.rebuild_to, spec_.dims, access, kFetchTimeoutMs, plan_notes_, stop);
  if (!logs) return logs.error().with_context(what);
  const int64_t t2 = mono_ns();
  for (const UnitId& id : mine) {
    auto it = full.find(id);
    if (it == full.end()) return fail(what, ": the window from iteration ", p.rebuild_window, " holds no full copy of ", id.name());
    SAL_TRY(rebuild_expert(p, id, *it->second.second, it->second.first, *logs));
  }
  std::vector<std::string> names;
  for (const UnitId& id : mine) names.push_back(id.name());
  spdlog::info("{}: {} ({} bytes of logs, iterations {}..{}; fetched the copies in {:.1f} ms, the logs in {:.1f}, "
               "replayed in {:.1f})", what, join(names, ", "), logs->bytes, first, p.rebuild_to, double(t1 - t0) / 1e6,
               double(t2 - t1) / 1e6, double(mono_ns() - t2) / 1e6);
  return {};
}

// One lost expert: its state after iteration `at` (a full copy), then iterations at+1..rebuild_to.
Status Trainer::rebuild_expert(const wire::PlanUpdate& p, const UnitId& id, const ckpt::UnitCopy& copy, uint64_t at,
                               const FetchedLogs& logs) {
  if (ckpt::unit_checksum(copy) != copy.checksum)
    return fail(id.name(), " in the slot of iteration ", at, ": checksum mismatch (the copy is corrupt)");
  if (at > p.rebuild_to) return fail(id.name(), "'s copy is of iteration ", at, ", past iteration ", p.rebuild_to);
  model::Unit u = model::make_unit(spec_.dims, id, spec_.seed);
  if (copy.w.size() != u.w.size() || copy.m.size() != u.w.size() || copy.v.size() != u.w.size())
    return fail(id.name(), " in the slot of iteration ", at, ": ", copy.w.size(), " weights, the unit has ", u.w.size());
  u.w = copy.w, u.m = copy.m, u.v = copy.v;
  for (uint64_t t = at + 1; t <= p.rebuild_to; ++t) {
    const size_t norm = size_t(t - uint64_t(p.rebuild_window) - 1);
    if (p.rebuild_window < 0 || t <= uint64_t(p.rebuild_window) || norm >= p.rebuild_norms.size())
      return fail(id.name(), ": the plan gives no gradient norm for iteration ", t);
    std::vector<const model::IterationLog*> senders;
    for (const auto& l : logs.steps.at(t).by_rank) senders.push_back(&l);
    SAL_TRY(model::replay_expert_step(spec_.dims, u, spec_.optim, t, p.rebuild_norms[norm], senders));
  }
  std::fill(u.g.begin(), u.g.end(), 0.0f);
  params_.experts[{id.layer, id.expert}] = std::move(u);
  return {};
}

void Trainer::keep_only(const std::vector<std::pair<int, int>>& held) {
  for (auto it = params_.experts.begin(); it != params_.experts.end();)
    it = std::find(held.begin(), held.end(), it->first) == held.end() ? params_.experts.erase(it) : std::next(it);
}

Status Trainer::move_state(const wire::PlanUpdate& p, bool current) {
  if (p.restore && p.restore_window >= 0) {
    SAL_TRY(restore_from_peers(p, current));
  } else if (p.restore) {
    SAL_TRY(restore(p));
  } else {
    SAL_TRY(migrate(p));
    SAL_TRY(rebuild_lost(p));
  }
  return add_new_experts(p);
}

Status Trainer::add_new_experts(const wire::PlanUpdate& p) {
  for (auto [l, e] : held_) {
    if (params_.expert(l, e)) continue;
    if (p.step > 0)
      return fail("plan ", p.number(), " gives rank ", rank_, " layer ", l, " expert ", e, " at step ", p.step,
                  " but no transfer brings its state");
    params_.experts.emplace(std::pair{l, e}, model::make_unit(spec_.dims, {model::UnitKind::expert, l, e}, spec_.seed));
  }
  return {};
}

// The units plan/unit_writers.h gives this rank: each by `copies` of its holders, the `absent` ranks
// left out, the writing spread over the ranks.
std::vector<const model::Unit*> Trainer::units_written(size_t copies, const std::vector<uint32_t>& absent) const {
  std::vector<const model::Unit*> dense{&params_.embedding};
  for (size_t l = 0; l < params_.dense.size(); ++l) {
    dense.push_back(&params_.dense[l]);
    dense.push_back(&params_.gate[l]);
  }
  plan::WriteRequest request{uint32_t(ranks_), copies, absent, unit_size(spec_.dims, UnitKind::expert) * sizeof(float),
                             {}};
  for (const model::Unit* u : dense) request.dense_bytes.push_back(u->w.size() * sizeof(float));
  const plan::UnitWriters writers = plan::unit_writers(holders_, request);
  const uint32_t me = uint32_t(rank_);
  auto mine = [me](const std::vector<uint32_t>& w) { return std::binary_search(w.begin(), w.end(), me); };
  std::vector<const model::Unit*> out;
  for (size_t i = 0; i < dense.size(); ++i)
    if (mine(writers.dense[i])) out.push_back(dense[i]);
  for (auto [l, e] : std::set<std::pair<int, int>>(held_.begin(), held_.end())) {
    auto it = params_.experts.find({l, e});
    if (it != params_.experts.end() && size_t(l) < writers.experts.size() && size_t(e) < writers.experts[l].size() &&
        mine(writers.experts[l][e]))
      out.push_back(&it->second);
  }
  return out;
}

std::vector<uint32_t> Trainer::ranks_lost() const {
  std::vector<uint32_t> out;
  if (!last_patch_) return out;
  const auto& in = last_patch_->ranks;
  for (uint32_t r = 0; r < uint32_t(ranks_); ++r)
    if (std::find(in.begin(), in.end(), r) == in.end()) out.push_back(r);
  return out;
}

std::vector<const model::Unit*> Trainer::checkpoint_share(const std::vector<uint32_t>& absent) const {
  return units_written(1, absent);
}

}  // namespace sal::runtime

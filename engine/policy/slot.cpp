// slot.cpp — see slot.h.
#include "policy/slot.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"

namespace sal::policy {

namespace {

// What one generation's decision came to: called for each generation the chain tries.
using Tried = std::function<void(Generation& g, double ms, bool error, bool rejected, const std::string& problem)>;

// One generation's decision for `in`, validated: the proposal, or nullopt with the problem.
std::optional<Proposal> attempt(Kind kind, Generation& g, const Input& in, std::string& problem, double& ms,
                                const Tried& tried) {
  int64_t t0 = mono_ns();
  auto p = g.decide(in);
  bool error = !p.ok(), rejected = false;
  if (p) {
    if (auto s = ops_for(kind).validate(*p, in); !s) {
      rejected = true;
      problem = "rejected: " + s.error().message();
    }
  } else {
    problem = p.error().message();
  }
  ms = double(mono_ns() - t0) / 1e6;
  if (tried) tried(g, ms, error, rejected, problem);
  if (error || rejected) return std::nullopt;
  return std::move(*p);
}

// The fallback chain: the live generation, else the previous one, else the floor. `problem` gets
// the live generation's own problem when it did not decide.
Decision fall_back(Kind kind, Generation* live, Generation* previous, const Input& in, std::string& problem,
                   const Tried& tried = {}) {
  Decision d{ops_for(kind).floor(in), "floor", "", 0};
  if (!live) return d;
  double ms = 0;
  if (auto p = attempt(kind, *live, in, problem, ms, tried)) return {std::move(*p), live->label(), "", ms};
  d.problem = live->label() + ": " + problem;
  std::string fallback_problem;
  if (previous) {
    if (auto p = attempt(kind, *previous, in, fallback_problem, ms, tried))
      return {std::move(*p), previous->label() + " (previous)", d.problem, ms};
  }
  return d;
}

}  // namespace

namespace {

// A copy of a generation, from its recipe: loaded again, its kept state restored.
Result<std::unique_ptr<Generation>> copy_of(const SlotSnapshot& snap, const SlotSnapshot::Recipe& r) {
  auto g = Generation::load(snap.kind, r.source, snap.env);
  if (!g) return g.error().with_context("a copy of generation " + std::to_string(r.number) + " from " + r.source.origin);
  (*g)->number = r.number;
  if (r.state) {
    if (auto s = (*g)->restore_kept(*r.state); !s) return s.error().with_context("a copy of " + (*g)->label());
  }
  return g;
}

}  // namespace

Decision answer(const SlotSnapshot& snap, const Input& in) {
  std::unique_ptr<Generation> live, previous;
  std::string problem;
  if (snap.live) {
    auto g = copy_of(snap, *snap.live);
    if (!g) problem = g.error().message();
    else live = std::move(*g);
  }
  if (snap.previous) {
    if (auto g = copy_of(snap, *snap.previous)) previous = std::move(*g);
  }
  if (snap.live && !live) {  // the live generation could not even be copied: as if it failed
    Decision d = fall_back(snap.kind, previous.get(), nullptr, in, problem);
    if (d.decided_by != "floor") d.decided_by += " (previous)";
    d.problem = problem;
    return d;
  }
  return fall_back(snap.kind, live.get(), previous.get(), in, problem);
}

Result<DiffReport> diff(const SlotSnapshot& snap, const Source& candidate) {
  auto g = Generation::load(snap.kind, candidate, snap.env);
  if (!g) return g.error().with_context("load");
  if (auto s = (*g)->selftest(); !s) return s.error();
  DiffReport r;
  r.candidate = (*g)->name() + " (" + (*g)->hash().substr(0, 12) + ")";
  r.live = "floor";
  if (!snap.latest) {
    r.summary = "no decision recorded yet: nothing to compare on";
    return r;
  }
  const Input& in = *snap.latest;
  const KindOps& ops = ops_for(snap.kind);
  auto theirs = (*g)->decide(in);
  if (!theirs) return theirs.error().with_context("the candidate's decision");
  if (auto s = ops.validate(*theirs, in); !s) return s.error().with_context("the candidate's proposal is invalid");
  Proposal ours = snap.last_proposal ? *snap.last_proposal : ops.floor(in);
  if (snap.live) {
    if (auto live = copy_of(snap, *snap.live)) {
      r.live = (*live)->label();
      std::string problem;
      double ms = 0;
      if (auto p = attempt(snap.kind, **live, in, problem, ms, {})) ours = std::move(*p);
    }
  }
  r.summary = ops.diff(ours, *theirs);
  return r;
}

Slot::Slot(Kind kind, GenerationEnv env) : kind_(kind), env_(std::move(env)) {}

void Slot::emit(const std::string& kind, const std::string& detail) {
  if (kind == "policy_refused" || kind == "policy_rollback" || kind == "policy_fallback") {
    spdlog::warn("{} slot: {}: {}", kind_name(kind_), kind, detail);
  } else {
    spdlog::info("{} slot: {}: {}", kind_name(kind_), kind, detail);
  }
  if (on_event) on_event({kind, detail});
}

namespace {

Status replay(const SlotSnapshot& snap, Generation& g) {
  const KindOps& ops = ops_for(snap.kind);
  for (size_t i = 0; i < snap.recent.size(); ++i) {
    auto p = g.decide(snap.recent[i]);
    Status s = p ? ops.validate(*p, snap.recent[i]) : Status(p.error());
    if (!s)
      return fail("replay of recent decision ", i + 1, " of ", snap.recent.size(), ": ", s.error().message());
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Generation>> prepare(const SlotSnapshot& snap, const Source& src) {
  auto g = Generation::load(snap.kind, src, snap.env);
  if (!g) return g.error().with_context("load");
  if (auto s = (*g)->selftest(); !s) return s.error();
  if (auto s = replay(snap, **g); !s) return s.error();
  if (snap.live && (*g)->has_restore()) {
    if (!snap.live->state_problem.empty()) return Error(snap.live->state_problem).with_context("state migration");
    if (snap.live->state) {
      if (auto s = (*g)->restore_kept(*snap.live->state); !s) return s.error().with_context("state migration");
    }
  }
  return g;
}

Status Slot::load(const Source& src, const std::string& who) {
  SlotSnapshot snap = snapshot();
  snap.env = env_;  // on the loop: the mesh is serviced while the candidate runs
  return install(prepare(snap, src), src, snap.version, who);
}

Status Slot::install(Result<std::unique_ptr<Generation>> g, const Source& src, uint64_t snapshot_version,
                     const std::string& who) {
  if (g && snapshot_version != version_)
    g = fail("the slot changed (a load or a rollback) while the candidate was prepared; load it again");
  if (!g) {
    std::string why = src.origin + ": " + g.error().message();
    emit("policy_refused", why + " (by " + who + "; the live generation keeps deciding)");
    return Error(why);
  }
  (*g)->set_service(env_.service);
  (*g)->number = ++counter_;
  ++version_;
  std::string detail = (*g)->name() + " gen " + std::to_string((*g)->number) + " from " + src.origin + " (" +
                       (*g)->hash().substr(0, 12) + ") by " + who + (recent_.empty() ? "" : ", replayed " +
                       std::to_string(recent_.size()) + " recent decisions");
  previous_ = std::move(live_);
  live_ = std::move(*g);
  live_->keep_state();
  consecutive_failures_ = 0;
  emit("policy_loaded", detail);
  return {};
}

Result<Source> Slot::reload_source() const {
  if (!live_) return fail("the ", kind_name(kind_), " slot has no live generation to reload");
  auto src = reread ? reread(live_->source()) : Result<Source>(live_->source());
  if (!src) return src.error().with_context("reload");
  return src;
}

Status Slot::reload(const std::string& who) {
  auto src = reload_source();
  if (!src) return src.error();
  return load(*src, who);
}

Status Slot::rollback(const std::string& who) {
  if (!previous_) return fail("the ", kind_name(kind_), " slot has no previous generation to roll back to");
  std::string detail = live_->name() + " gen " + std::to_string(live_->number) + " -> " + previous_->name() + " gen " +
                       std::to_string(previous_->number) + " by " + who;
  std::swap(live_, previous_);
  ++version_;
  consecutive_failures_ = 0;
  emit("policy_rollback", detail);
  return {};
}

void Slot::note_failure(const std::string& problem) {
  ++consecutive_failures_;
  bool in_probation = live_->stats.decisions <= kProbationDecisions &&
                      int64_t(live_->stats.errors + live_->stats.rejections) >= kFailuresToRollback;
  if ((consecutive_failures_ >= kFailuresToRollback || in_probation) && previous_) {
    emit("policy_rollback", live_->name() + " gen " + std::to_string(live_->number) + " failed " +
                                std::to_string(consecutive_failures_) + " time(s), last: " + problem);
    std::swap(live_, previous_);
    ++version_;
    consecutive_failures_ = 0;
  }
}

Decision Slot::decide(const Input& in) {
  recent_.push_back(in);
  if (recent_.size() > kReplayInputs) recent_.pop_front();
  std::string problem;
  std::vector<Generation*> tried;
  Decision d = fall_back(kind_, live_.get(), previous_.get(), in, problem,
                         [&](Generation& g, double ms, bool error, bool rejected, const std::string& why) {
                           g.record(ms, error, rejected, why);
                           tried.push_back(&g);
                         });
  for (Generation* g : tried) g->keep_state();  // its decide may have changed its state: for questions
  if (live_ && d.problem.empty()) {
    consecutive_failures_ = 0;
  } else if (live_) {
    emit("policy_fallback", d.problem + "; decided by " + d.decided_by);
    note_failure(problem);
  }
  if (d.decided_by == "floor") ++floor_decisions_;
  last_ = d;
  if (on_decision) on_decision(d);
  return d;
}

SlotSnapshot Slot::snapshot() const {
  SlotSnapshot snap;
  snap.kind = kind_;
  snap.env = env_;
  snap.env.service = nullptr;
  auto recipe = [](const Generation& g) {
    return SlotSnapshot::Recipe{g.source(), g.number, g.kept_state(), g.kept_problem()};
  };
  if (live_) snap.live = recipe(*live_);
  if (previous_) snap.previous = recipe(*previous_);
  if (!recent_.empty()) snap.latest = recent_.back();
  if (last_) snap.last_proposal = last_->proposal;
  snap.recent = recent_;
  snap.version = version_;
  return snap;
}

Result<DiffReport> Slot::diff(const Source& candidate) { return policy::diff(snapshot(), candidate); }

}  // namespace sal::policy

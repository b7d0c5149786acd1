// slot.cpp — see slot.h.
#include "policy/slot.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"

namespace sal::policy {

Slot::Slot(Kind kind, GenerationEnv env) : kind_(kind), env_(std::move(env)) {}

void Slot::emit(const std::string& kind, const std::string& detail) {
  if (kind == "policy_refused" || kind == "policy_rollback" || kind == "policy_fallback") {
    spdlog::warn("{} slot: {}: {}", kind_name(kind_), kind, detail);
  } else {
    spdlog::info("{} slot: {}: {}", kind_name(kind_), kind, detail);
  }
  if (on_event) on_event({kind, detail});
}

Status Slot::replay(Generation& g) {
  const KindOps& ops = ops_for(kind_);
  for (size_t i = 0; i < recent_.size(); ++i) {
    auto p = g.decide(recent_[i]);
    Status s = p ? ops.validate(*p, recent_[i]) : Status(p.error());
    if (!s)
      return fail("replay of recent decision ", i + 1, " of ", recent_.size(), ": ", s.error().message());
  }
  return {};
}

Result<std::unique_ptr<Generation>> Slot::prepare(const Source& src) {
  auto g = Generation::load(kind_, src, env_);
  if (!g) return g.error().with_context("load");
  if (auto s = (*g)->selftest(); !s) return s.error();
  if (auto s = replay(**g); !s) return s.error();
  if (live_) {
    if (auto s = (*g)->migrate_from(*live_); !s) return s.error().with_context("state migration");
  }
  return g;
}

Status Slot::load(const Source& src, const std::string& who) {
  auto g = prepare(src);
  if (!g) {
    std::string why = src.origin + ": " + g.error().message();
    emit("policy_refused", why + " (by " + who + "; the live generation keeps deciding)");
    return Error(why);
  }
  (*g)->number = ++counter_;
  std::string detail = (*g)->name() + " gen " + std::to_string((*g)->number) + " from " + src.origin + " (" +
                       (*g)->hash().substr(0, 12) + ") by " + who + (recent_.empty() ? "" : ", replayed " +
                       std::to_string(recent_.size()) + " recent decisions");
  previous_ = std::move(live_);
  live_ = std::move(*g);
  consecutive_failures_ = 0;
  emit("policy_loaded", detail);
  return {};
}

Status Slot::reload(const std::string& who) {
  if (!live_) return fail("the ", kind_name(kind_), " slot has no live generation to reload");
  auto src = reread ? reread(live_->source()) : Result<Source>(live_->source());
  if (!src) return src.error().with_context("reload");
  return load(*src, who);
}

Status Slot::rollback(const std::string& who) {
  if (!previous_) return fail("the ", kind_name(kind_), " slot has no previous generation to roll back to");
  std::string detail = live_->name() + " gen " + std::to_string(live_->number) + " -> " + previous_->name() + " gen " +
                       std::to_string(previous_->number) + " by " + who;
  std::swap(live_, previous_);
  consecutive_failures_ = 0;
  emit("policy_rollback", detail);
  return {};
}

std::optional<Proposal> Slot::try_decide(Generation& g, const Input& in, std::string& problem, double& ms) {
  int64_t t0 = mono_ns();
  auto p = g.decide(in);
  bool error = !p.ok(), rejected = false;
  if (p) {
    if (auto s = ops_for(kind_).validate(*p, in); !s) {
      rejected = true;
      problem = "rejected: " + s.error().message();
    }
  } else {
    problem = p.error().message();
  }
  ms = double(mono_ns() - t0) / 1e6;
  g.record(ms, error, rejected, problem);
  if (error || rejected) return std::nullopt;
  return std::move(*p);
}

void Slot::note_failure(const std::string& problem) {
  ++consecutive_failures_;
  bool in_probation = live_->stats.decisions <= kProbationDecisions &&
                      int64_t(live_->stats.errors + live_->stats.rejections) >= kFailuresToRollback;
  if ((consecutive_failures_ >= kFailuresToRollback || in_probation) && previous_) {
    emit("policy_rollback", live_->name() + " gen " + std::to_string(live_->number) + " failed " +
                                std::to_string(consecutive_failures_) + " time(s), last: " + problem);
    std::swap(live_, previous_);
    consecutive_failures_ = 0;
  }
}

Decision Slot::decide(const Input& in) {
  recent_.push_back(in);
  if (recent_.size() > kReplayInputs) recent_.pop_front();
  Decision d{ops_for(kind_).floor(in), "floor", "", 0};
  if (live_) {
    std::string problem;
    double ms = 0;
    if (auto p = try_decide(*live_, in, problem, ms)) {
      consecutive_failures_ = 0;
      d = {std::move(*p), live_->name() + " gen " + std::to_string(live_->number), "", ms};
      last_ = d;
      return d;
    }
    d.problem = live_->name() + " gen " + std::to_string(live_->number) + ": " + problem;
    std::string fallback_problem;
    if (previous_) {
      if (auto p = try_decide(*previous_, in, fallback_problem, ms))
        d = {std::move(*p), previous_->name() + " gen " + std::to_string(previous_->number) + " (previous)", d.problem, ms};
    }
    emit("policy_fallback", d.problem + "; decided by " + d.decided_by);
    note_failure(problem);
  }
  if (d.decided_by == "floor") ++floor_decisions_;
  last_ = d;
  return d;
}

Result<DiffReport> Slot::diff(const Source& candidate) {
  auto g = Generation::load(kind_, candidate, env_);
  if (!g) return g.error().with_context("load");
  if (auto s = (*g)->selftest(); !s) return s.error();
  DiffReport r;
  r.candidate = (*g)->name() + " (" + (*g)->hash().substr(0, 12) + ")";
  r.live = live_ ? live_->name() + " gen " + std::to_string(live_->number) : "floor";
  if (recent_.empty()) {
    r.summary = "no decision recorded yet: nothing to compare on";
    return r;
  }
  const Input& in = recent_.back();
  const KindOps& ops = ops_for(kind_);
  auto theirs = (*g)->decide(in);
  if (!theirs) return theirs.error().with_context("the candidate's decision");
  if (auto s = ops.validate(*theirs, in); !s) return s.error().with_context("the candidate's proposal is invalid");
  Proposal ours = last_ ? last_->proposal : ops.floor(in);
  if (live_) {
    if (auto p = live_->decide(in); p && ops.validate(*p, in)) ours = std::move(*p);
  }
  r.summary = ops.diff(ours, *theirs);
  return r;
}

}  // namespace sal::policy

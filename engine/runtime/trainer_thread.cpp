// trainer_thread.cpp — see trainer_thread.h.
#include "runtime/trainer_thread.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <zmq_addon.hpp>

#include "core/clock.h"
#include "core/lifetime.h"
#include "core/thread_name.h"
#include "wire/codec.h"
#include "wire/fence.h"

namespace sal::runtime {

TrainerThread::TrainerThread(zmq::context_t& ctx, JobLoader load_job, uint32_t index, std::string answers_endpoint,
                             DeviceFactory cuda)
    : ctx_(ctx),
      load_job_(std::move(load_job)),
      cuda_(std::move(cuda)),
      index_(index),
      answers_endpoint_(std::move(answers_endpoint)) {
  thread_ = std::thread([this] { run(); });
}

TrainerThread::~TrainerThread() {
  post(StopRequest{});  // after whatever is queued: a draining worker finishes its step
  if (thread_.joinable()) thread_.join();
}

void TrainerThread::post(Request r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(r));
  }
  cv_.notify_one();
}

void TrainerThread::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (trainer_) trainer_->abort(why);
}

void TrainerThread::abandon(uint64_t plan, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (trainer_) trainer_->abandon(plan, why);
}

void TrainerThread::patch(wire::StepPatch p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (trainer_) trainer_->interrupt_for_patch(p);
  }
  post(std::move(p));
}

wire::Holding TrainerThread::holding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

// A change is reported at once (a status with the holding; the worker's loop keeps its own state),
// so what the agent reports to a restarted controller is never a heartbeat interval behind.
void TrainerThread::update_holding() {
  if (!trainer_) return;
  wire::Holding h{trainer_->plan(), trainer_->steps_seen(), -1, 0};
  if (auto p = trainer_->pending()) h.pending = int64_t(*p), h.pending_epoch = begun_epoch_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (h.plan == held_.plan && h.steps == held_.steps && h.pending == held_.pending &&
        h.pending_epoch == held_.pending_epoch)
      return;
    held_ = h;
  }
  answer(wire::WorkerStatus{index_, wire::WorkerState::ready, h});
}

std::optional<std::string> TrainerThread::fatal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fatal_;
}

template <class M>
void TrainerThread::answer(const M& msg) {
  (void)zmq::send_multipart(*answers_, wire::encode(msg), zmq::send_flags::dontwait);
}

void TrainerThread::run() {
  name_this_thread("sal-trainer");
  // Below the worker's control thread (its liveness to its agent) and the agents and controller:
  // every thread started from here inherits it (the kernels' pool, the snapshot threads, the data
  // plane's), so on a machine short of CPU the heartbeats still go out in time.
  lower_this_thread_priority(kComputeNice);
  answers_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::pair);
  answers_->set(zmq::sockopt::linger, 0);
  answers_->connect(answers_endpoint_);
  for (;;) {
    Request r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty(); });
      r = std::move(queue_.front());
      queue_.pop_front();
      // A plan the controller abandoned (said so, or a newer one is queued behind it): skip it.
      if (const auto* p = std::get_if<wire::PlanUpdate>(&r)) {
        bool superseded = std::any_of(queue_.begin(), queue_.end(),
                                      [](const Request& q) { return std::holds_alternative<wire::PlanUpdate>(q); });
        if (superseded || (trainer_ && trainer_->abandoned(p->number()))) {
          spdlog::info("plan {} skipped: {}", p->number(), superseded ? "a newer plan is queued" : "the controller abandoned it");
          continue;
        }
      }
    }
    if (std::holds_alternative<StopRequest>(r)) break;
    std::visit([this](const auto& req) {
      if constexpr (!std::is_same_v<std::decay_t<decltype(req)>, StopRequest>) handle(req);
    }, r);
    update_holding();
    if (fatal()) break;
  }
  // Snapshots still being written are answered to no one now: stop them rather than finish them
  // (a GPU job's are gigabytes; the agent kills a worker that takes over two seconds to stop).
  if (snapshots_) snapshots_->cancel();
  snapshots_.reset();
  answers_.reset();
}

void TrainerThread::handle(const wire::JobSpec& j) {
  if (trainer_) return;  // the job does not change under a running worker
  auto spec = load_job_(j);
  Status s = spec ? Status{} : Status(spec.error());
  std::unique_ptr<Trainer> t;
  if (s) {
    t = std::make_unique<Trainer>(ctx_, *spec, cuda_);
    s = t->init();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s) {
      fatal_ = s.error().message();
      spdlog::error("cannot start training: {}", *fatal_);
      return;
    }
    trainer_ = std::move(t);
  }
  snapshots_ = std::make_unique<ckpt::SnapshotWriter>([this](wire::SaveDone d) { post(SnapshotWritten{std::move(d)}); });
  spdlog::info("ready to train job {}", j.label);
  answer(wire::WorkerStatus{index_, wire::WorkerState::ready, {}});
  if (trainer_->warms_up()) post(WarmUpRequest{});
}

namespace {

// A worker's plan switch at least this long is said in its log at info, with its phases (a GPU
// worker's can take seconds: where they go is the question; otherwise the line is a debug one).
constexpr double kSlowSwitchMs = 1000;

// ", restored from DIR" for a restoring plan's line ("" otherwise).
std::string restored_from(const wire::PlanUpdate& p) {
  if (!p.restore) return "";
  if (p.restore_window >= 0) return ", restored from the sparse window of iteration " + std::to_string(p.restore_window);
  return ", restored from " + (p.restore_dir.empty() ? std::string("the seed") : p.restore_dir);
}

}  // namespace

void TrainerThread::handle(const wire::PlanUpdate& p) {
  plan_seen_ = true;
  wire::PlanReady r{0, index_, p.number(), false, "", 0, 0, 0, {}};
  int64_t t0 = mono_ns();
  if (!trainer_) {
    r.detail = "no job loaded";
  } else if (auto s = trainer_->apply_plan(p); !s) {
    r.detail = s.error().message();
    r.snapshot_unreadable = s.error().code() == kSnapshotUnreadable;
  } else {
    r.ok = true;
  }
  r.ms = double(mono_ns() - t0) / 1e6;
  if (trainer_) r.connect_ms = trainer_->plan_times().connect_ms, r.migrate_ms = trainer_->plan_times().migrate_ms;
  if (trainer_) r.notes = trainer_->plan_notes();
  if (!r.ok) spdlog::warn("plan {} failed: {}", p.number(), r.detail);
  else
    spdlog::log(r.ms >= kSlowSwitchMs ? spdlog::level::info : spdlog::level::debug,
                "plan {} applied in {:.1f} ms ({}{})", p.number(), r.ms, switch_phases(trainer_->plan_times()),
                restored_from(p));
  answer(r);
}

// A step of another plan than ours is not ours to vote on (we are not among its ranks).
void TrainerThread::handle(const wire::StepBegin& b) {
  if (!trainer_ || trainer_->plan() != b.plan) return;
  begun_epoch_ = b.epoch;
  spdlog::debug("step {} of epoch {} begins", b.step, b.epoch);
  auto out = trainer_->step(b.step, b.shares, KeptPatch{b.kept_step, b.kept_patch});
  if (!out && trainer_->grouped() && verdict_queued(b.step)) {
    spdlog::info("step {} failed ({}); the controller's word on it is queued", b.step, out.error().message());
    return;
  }
  answer(vote_of(b, out, 0));
}

void TrainerThread::handle(const wire::StepPatch& p) {
  if (!trainer_ || trainer_->plan() != p.plan) return;
  spdlog::info("step {} patch {}: {}", p.step, p.patch, p.reason);
  auto out = trainer_->patch(p);
  answer(vote_of(wire::StepBegin{begun_epoch_, p.step, p.plan}, out, p.patch));
}

bool TrainerThread::verdict_queued(uint64_t step) {
  auto found = [this, step] {
    return std::any_of(queue_.begin(), queue_.end(), [step](const Request& r) {
      if (const auto* p = std::get_if<wire::StepPatch>(&r)) return p->step == step;
      if (const auto* a = std::get_if<wire::StepAbort>(&r)) return a->step == step;
      return false;
    });
  };
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(kPatchWaitMs), found);
}

wire::StepVote TrainerThread::vote_of(const wire::StepBegin& b, const Result<StepOutcome>& out, uint32_t patch) const {
  wire::StepVote v{0, index_, b.epoch, b.step, false, "", 0, 0, 0, 0, 0, 0, {}};
  v.patch = patch;
  if (!out) {
    v.detail = out.error().message();
    spdlog::warn("step {} failed: {}", b.step, v.detail);
  } else {
    v.ok = true;
    v.ce_sum = out->stats.ce_sum;
    v.aux = out->stats.aux;
    v.tokens = uint64_t(out->stats.tokens);
    v.grad_norm = out->grad_norm;
    v.lr = out->lr;
    v.compute_ms = out->compute_ms;
    v.busy_ms = out->times.busy_ms, v.exchange_ms = out->times.exchange_ms;
    v.sync_ms = out->times.sync_ms, v.update_ms = out->times.update_ms;
    v.busy_cpu_ms = out->times.busy_cpu_ms, v.expert_cpu_ms = out->times.expert_cpu_ms;
    v.expert_rows = uint64_t(out->stats.expert_rows), v.process_cpu_ms = out->times.process_cpu_ms;
    for (const auto& layer : out->stats.expert_counts) v.loads.insert(v.loads.end(), layer.begin(), layer.end());
    auto held = trainer_->sparse_held();
    v.sparse_bytes = held.bytes, v.sparse_from = held.window_from, v.sparse_to = held.window_to;
    v.sparse_copy_ms = held.copy_ms, v.sparse_slot_bytes = held.slot_bytes;
    v.sparse_path_cpu_ms = held.path_cpu_ms;
    v.digests = out->digests;
    v.val_ce_sum = out->val_ce_sum, v.val_tokens = uint64_t(out->val_tokens);
    v.log_bytes = out->log_bytes;
    spdlog::debug("step {} computed in {:.1f} ms (busy {:.1f}, exchange {:.1f}, sync {:.1f}; busy cpu {:.1f}, experts' cpu "
                  "{:.1f} for {} rows, process cpu {:.1f}; update {:.1f}; {} page faults): votes yes",
                  b.step, v.compute_ms, v.busy_ms, v.exchange_ms, v.sync_ms, v.busy_cpu_ms, v.expert_cpu_ms, v.expert_rows,
                  v.process_cpu_ms, v.update_ms, out->times.page_faults);
  }
  return v;
}

// A commit counts only for the step this worker computed, in the epoch it began in: a node cut off
// from the controller never applies a step of an epoch it is not part of.
void TrainerThread::handle(const wire::StepCommit& c) {
  if (!trainer_) return;
  if (trainer_->pending() == c.step && c.epoch != begun_epoch_) {
    spdlog::warn("commit of step {} in epoch {} refused: the step began in epoch {}", c.step, c.epoch, begun_epoch_);
    return;
  }
  bool applies = trainer_->pending() == c.step;
  if (auto s = trainer_->commit(c.step); !s) {
    std::lock_guard<std::mutex> lock(mu_);
    fatal_ = s.error().message();
    spdlog::error("cannot go on training: {}", *fatal_);
  } else if (applies) {
    spdlog::debug("step {} of epoch {} committed", c.step, c.epoch);
  }
}

void TrainerThread::handle(const wire::StepAbort& a) {
  if (!trainer_) return;
  spdlog::debug("step {} aborted: {}", a.step, a.reason);
  if (a.epoch != wire::kFenceEpoch) trainer_->discard();  // a fence keeps a voted step's gradients
  trainer_->clear_abort();
}

void TrainerThread::handle(const wire::SaveCheckpoint& s) {
  if (!trainer_ || trainer_->plan() != s.plan) return;  // not a rank of the plan that saves
  wire::SaveDone d{0, index_, s.step, false, "", 0, s.snapshot, 0, 0, 0};
  if (s.snapshot) {
    // copy_ms is the pause training sees: a CPU worker's copy; a GPU worker's start of its copy
    // (and the wait for the previous snapshot's, if still in flight). The GPU copy itself
    // overlaps the next step; the writer waits for it, and that wait counts in ms.
    int64_t t0 = mono_ns();
    auto units = trainer_->snapshot_share(s.absent);
    d.copy_ms = d.ms = double(mono_ns() - t0) / 1e6;
    if (!units) {
      d.detail = units.error().with_context("snapshot of step " + std::to_string(s.step)).message();
      answer(d);
      return;
    }
    snapshots_->write(s.dir, s.step, trainer_->with_snapshot_fault(std::move(*units), s.step), d);
    return;
  }
  auto n = trainer_ ? trainer_->save(s.dir, s.step, s.absent) : Result<uint32_t>(fail("no job loaded"));
  if (n) {
    d.ok = true;
    d.units = *n;
  } else {
    d.detail = n.error().message();
  }
  answer(d);
}

void TrainerThread::handle(const wire::FaultArm& f) {
  if (trainer_) trainer_->arm_fault(f);
}

void TrainerThread::handle(const SnapshotWritten& w) { answer(w.done); }

// A request the warm-up must not delay: anything but the bookkeeping a worker outside every plan
// receives too (the steps' commits and aborts, the drills' fault arming, a snapshot written).
bool TrainerThread::work_queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(queue_.begin(), queue_.end(), [](const Request& r) {
    return !std::holds_alternative<wire::StepCommit>(r) && !std::holds_alternative<wire::StepAbort>(r) &&
           !std::holds_alternative<wire::FaultArm>(r) && !std::holds_alternative<SnapshotWritten>(r);
  });
}

void TrainerThread::handle(const WarmUpRequest&) {
  if (plan_seen_) return;  // too late: a relaunched image's plan came with its job
  auto done = trainer_->warm_up([this] { return work_queued(); });
  if (!done)
    spdlog::warn("warm-up pass failed (training goes on without it): {}", done.error().message());
  else if (done->finished)
    spdlog::info("warmed up: {} MiB of heap faulted in and a pass of {} sequences in {:.0f} ms",
                 done->heap_bytes >> 20, done->sequences, done->ms);
  else if (done->ms > 0)
    spdlog::info("warm-up stopped after {:.0f} ms ({} MiB of heap faulted in): a request came", done->ms,
                 done->heap_bytes >> 20);
}

}  // namespace sal::runtime

// trainer_thread.h — the worker's training thread. The worker's control loop (worker.cpp) stays
// responsive — it reports liveness to the agent every heartbeat and can abort a blocked collective —
// while this thread does the work: it takes the controller's requests in order from a queue and
// answers each with a wire message (WorkerStatus ready, PlanReady, StepVote, SaveDone) that the
// control loop forwards. A failure to start (bad job, missing data) is fatal: the thread stops and
// says why; so is a failed commit on a GPU (the parameters are then in an unknown state). A
// StepPatch (a grouped plan's step that lost ranks) first ends the data planes it replaces, from the
// control loop, then queues like the rest; its vote carries the patch's number.
#pragma once

#include <zmq.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "ckpt/writer.h"
#include "runtime/train_spec.h"
#include "runtime/trainer.h"
#include "wire/messages.h"

namespace sal::runtime {

using JobLoader = std::function<Result<TrainSpec>(const wire::JobSpec&)>;

struct StopRequest {};
// A background snapshot write finished (its SaveDone goes out from the training thread).
struct SnapshotWritten {
  wire::SaveDone done;
};
// A CPU worker's warm-up pass (warm_up.h), queued once it is ready; a request queued after it that
// the worker must act on (a plan, a step, a stop) stops it at a layer's boundary.
struct WarmUpRequest {};
using Request = std::variant<wire::JobSpec, wire::PlanUpdate, wire::StepBegin, wire::StepCommit, wire::StepAbort,
                             wire::StepPatch, wire::SaveCheckpoint, wire::FaultArm, SnapshotWritten, WarmUpRequest,
                             StopRequest>;

// A grouped plan's step that failed (a rank gone in the middle) waits this long for the
// controller's word — a StepPatch that keeps the step, or its abort — before voting no: a vote no
// would abort the step before the controller has heard of the loss and could patch it.
constexpr int64_t kPatchWaitMs = 2000;
// The training thread's nice value (and that of every thread it starts).
constexpr int kComputeNice = 5;

class TrainerThread {
 public:
  // Answers go out on an inproc PAIR connected to `answers_endpoint` (bound by the control loop).
  // `cuda` opens the GPU of a cuda:N worker (Trainer's constructor).
  TrainerThread(zmq::context_t& ctx, JobLoader load_job, uint32_t index, std::string answers_endpoint,
                DeviceFactory cuda = {});
  // Finishes the queued requests, then joins (call abort() first to cut a blocked step short).
  ~TrainerThread();

  void post(Request r);
  // Thread-safe: ends the current plan's data plane (a blocked collective returns with an error).
  void abort(const std::string& why);
  // Thread-safe: the controller abandoned plan `plan` (Trainer::abandon); its PlanUpdate, queued
  // or not yet come, is skipped.
  void abandon(uint64_t plan, const std::string& why);
  // Thread-safe: a patch of the step in flight — ends the data planes it replaces (a blocked
  // synchronisation returns), then queues it.
  void patch(wire::StepPatch p);
  // The reason the thread stopped on its own (a fatal error), if it did.
  std::optional<std::string> fatal() const;
  // Thread-safe: what the worker's state has seen (plan, committed steps, pending step), as of the
  // last request handled.
  wire::Holding holding() const;

 private:
  void run();
  void handle(const wire::JobSpec& j);
  void handle(const wire::PlanUpdate& p);
  void handle(const wire::StepBegin& b);
  void handle(const wire::StepCommit& c);
  void handle(const wire::StepAbort& a);
  void handle(const wire::StepPatch& p);
  // After a grouped step failed: true when the controller's patch or abort of `step` came within
  // kPatchWaitMs (it is queued: it answers), false when the vote no should go out.
  bool verdict_queued(uint64_t step);
  wire::StepVote vote_of(const wire::StepBegin& b, const Result<StepOutcome>& out, uint32_t patch) const;
  void handle(const wire::SaveCheckpoint& s);
  void handle(const wire::FaultArm& f);
  void handle(const SnapshotWritten& w);
  void handle(const WarmUpRequest&);
  bool work_queued() const;
  template <class M>
  void answer(const M& msg);
  void update_holding();

  zmq::context_t& ctx_;
  JobLoader load_job_;
  DeviceFactory cuda_;
  uint32_t index_;
  std::string answers_endpoint_;
  std::unique_ptr<Trainer> trainer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  std::optional<std::string> fatal_;
  wire::Holding held_;       // guarded by mu_
  uint64_t begun_epoch_ = 0;  // the epoch of the last step begun (its commit must carry it)
  bool plan_seen_ = false;    // a PlanUpdate was handled (a warm-up still queued is then skipped)
  bool stop_ = false;
  std::unique_ptr<zmq::socket_t> answers_;
  std::unique_ptr<ckpt::SnapshotWriter> snapshots_;  // created with the trainer; cancelled when the thread stops
  std::thread thread_;
};

}  // namespace sal::runtime

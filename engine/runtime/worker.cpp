// worker.cpp — see worker.h.
#include "runtime/worker.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "core/clock.h"
#include "core/lifetime.h"
#include "runtime/relaunch.h"
#include "wire/codec.h"

namespace sal::runtime {
namespace {

volatile sig_atomic_t g_terminate = 0;

void on_term(int) { g_terminate = 1; }

class WorkerLoop {
 public:
  explicit WorkerLoop(const WorkerOptions& o)
      : o_(o), agent_(ctx_, zmq::socket_type::dealer), answers_(ctx_, zmq::socket_type::pair) {}

  int run() {
    if (o_.pending_plan_fd >= 0) {
      auto p = pending_plan(o_.pending_plan_fd);
      if (!p) {
        spdlog::error("relaunched, but {}", p.error().message());
        return 1;
      }
      pending_ = std::move(*p);
      state_ = wire::WorkerState::ready;  // it was; it is applying a plan
    }
    agent_.set(zmq::sockopt::linger, 200);
    agent_.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
    agent_.connect(o_.agent);
    std::string answers = "inproc://trainer-answers";
    answers_.bind(answers);
    trainer_ = std::make_unique<TrainerThread>(ctx_, o_.load_job, o_.index, answers, o_.cuda);
    send(wire::WorkerHello{o_.index, o_.device, uint32_t(getpid()), pending_ ? pending_->number() : 0});
    send(wire::WorkerStatus{o_.index, state_, {}});
    int64_t next_status = mono_ns();
    while (!done_ && !g_terminate) {
      zmq::pollitem_t items[] = {{agent_.handle(), 0, ZMQ_POLLIN, 0}, {answers_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(o_.heartbeat_ms / 2 + 1));
      while (!done_ && (agent_.get(zmq::sockopt::events) & ZMQ_POLLIN)) from_agent();
      if (done_) break;  // stop() has joined and released the training thread
      while (answers_.get(zmq::sockopt::events) & ZMQ_POLLIN) from_trainer();
      if (auto why = trainer_->fatal()) return fail_start(*why);
      if (mono_ns() >= next_status) {  // liveness towards the agent, also while a step computes
        send(wire::WorkerStatus{o_.index, state_, trainer_->holding()});
        next_status = mono_ns() + o_.heartbeat_ms * 1'000'000;
      }
    }
    if (g_terminate && trainer_) {
      spdlog::info("terminated by signal");
      trainer_->abort("worker terminated");
    }
    trainer_.reset();
    return exit_code_;
  }

 private:
  template <class M>
  void send(const M& m) {
    (void)zmq::send_multipart(agent_, wire::encode(m), zmq::send_flags::dontwait);
  }

  int fail_start(const std::string& why) {
    send(wire::ErrorReply{uint16_t(wire::ErrorCode::bad_request), why});
    trainer_.reset();
    return 1;
  }

  // Answers of the training thread go to the agent as they are; a ready status changes ours.
  void from_trainer() {
    wire::Parts parts;
    if (!zmq::recv_multipart(answers_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    // The training thread's status says it is ready, or what it holds now; the state is the loop's
    // (a draining worker stays draining).
    if (auto env = wire::open(parts); env && env->type == wire::MsgType::worker_status) {
      if (auto m = wire::decode<wire::WorkerStatus>(*env)) {
        if (state_ == wire::WorkerState::starting) state_ = m->state;
        return send(wire::WorkerStatus{o_.index, state_, m->held});
      }
    }
    (void)zmq::send_multipart(agent_, parts, zmq::send_flags::dontwait);
  }

  void from_agent() {
    wire::Parts parts;
    if (!zmq::recv_multipart(agent_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    auto env = wire::open(parts);
    if (!env) {
      spdlog::warn("bad message from agent: {}", env.error().message());
      return;
    }
    using T = wire::MsgType;
    switch (env->type) {
      case T::job_spec:
        forward<wire::JobSpec>(*env);
        post_pending();
        break;
      case T::plan_update:
        if (auto m = wire::decode<wire::PlanUpdate>(*env); m && m->relaunch) return relaunch_for(std::move(*m));
        forward<wire::PlanUpdate>(*env);
        break;
      case T::step_begin: forward<wire::StepBegin>(*env); break;
      case T::step_commit: forward<wire::StepCommit>(*env); break;
      case T::save_checkpoint: forward<wire::SaveCheckpoint>(*env); break;
      case T::fault_arm: forward<wire::FaultArm>(*env); break;
      case T::step_abort:
        if (auto m = wire::decode<wire::StepAbort>(*env); m && m->plan > 0) {
          spdlog::info("plan {} abandoned by the controller: {}", m->plan, m->reason);
          trainer_->abandon(m->plan, m->reason);
        }
        trainer_->abort("step aborted by the controller");
        forward<wire::StepAbort>(*env);
        break;
      case T::step_patch:
        if (auto m = wire::decode<wire::StepPatch>(*env)) trainer_->patch(std::move(*m));
        break;
      case T::command:
        if (auto m = wire::decode<wire::Command>(*env)) stop(*m);
        break;
      default:
        spdlog::warn("unexpected {} from agent", wire::type_name(env->type));
    }
  }

  template <class M>
  void forward(const wire::Envelope& env) {
    auto m = wire::decode<M>(env);
    if (!m) {
      spdlog::warn("bad message from agent: {}", m.error().message());
      return;
    }
    trainer_->post(std::move(*m));
  }

  // A relaunched image's plan, from the descriptor its predecessor left it.
  static Result<wire::PlanUpdate> pending_plan(int fd) {
    auto frames = take_pending(fd);
    if (!frames) return frames.error();
    auto env = wire::open(*frames);
    if (!env) return env.error().with_context("the pending plan");
    return wire::decode<wire::PlanUpdate>(*env);
  }

  // The plan this image was relaunched for goes to the training thread after its job.
  void post_pending() {
    if (!pending_) return;
    spdlog::info("relaunched as a new process {} ms ago: applying plan {}", (mono_ns() - o_.relaunched_at_ns) / 1'000'000,
                 pending_->number());
    trainer_->post(std::move(*pending_));
    pending_.reset();
  }

  // Starts again as a new process image that applies `plan` (relaunch.h); the training thread ends
  // first. Returns only if the relaunch failed: the worker then exits (its agent reports it).
  void relaunch_for(wire::PlanUpdate plan) {
    spdlog::info("plan {}: restoring as a new process (train.restart = relaunch)", plan.number());
    plan.relaunch = false;
    trainer_->abort("relaunching for plan " + std::to_string(plan.number()));
    trainer_.reset();
    spdlog::default_logger()->flush();
    Status s = relaunch(wire::encode(plan));
    spdlog::error("{}", s.error().message());
    exit_code_ = 1;
    done_ = true;
  }

  // Stop and drain end the worker after what is queued (a drained worker finishes its step).
  void stop(const wire::Command& c) {
    state_ = c.verb == wire::Verb::drain ? wire::WorkerState::draining : wire::WorkerState::stopped;
    send(wire::WorkerStatus{o_.index, state_, trainer_->holding()});
    spdlog::info("{}: {}", c.verb == wire::Verb::drain ? "draining" : "stopping", c.reason);
    if (c.verb != wire::Verb::drain) trainer_->abort("worker stopping");
    trainer_.reset();  // runs the queue to its end (a draining worker's step and vote), then joins
    while (answers_.get(zmq::sockopt::events) & ZMQ_POLLIN) from_trainer();
    send(wire::WorkerStatus{o_.index, wire::WorkerState::stopped, {}});
    done_ = true;
  }

  const WorkerOptions& o_;
  zmq::context_t ctx_{1};
  zmq::socket_t agent_;
  zmq::socket_t answers_;
  std::unique_ptr<TrainerThread> trainer_;
  wire::WorkerState state_ = wire::WorkerState::starting;
  std::optional<wire::PlanUpdate> pending_;  // a relaunched image's plan, until its job is here
  bool done_ = false;
  int exit_code_ = 0;
};

}  // namespace

int run_worker(const WorkerOptions& opts) {
  die_with_parent(opts.parent_pid);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, on_term);
  signal(SIGINT, SIG_IGN);  // Ctrl-C goes to the whole process group; the agent decides
  try {
    return WorkerLoop(opts).run();
  } catch (const std::exception& e) {
    spdlog::error("worker failed: {}", e.what());
    return 1;
  }
}

}  // namespace sal::runtime

// worker.cpp — see worker.h.
#include "runtime/worker.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "core/clock.h"
#include "core/lifetime.h"
#include "wire/codec.h"

namespace sal::runtime {
namespace {

volatile sig_atomic_t g_terminate = 0;

void on_term(int) { g_terminate = 1; }

class WorkerLoop {
 public:
  explicit WorkerLoop(const WorkerOptions& o) : o_(o), sock_(ctx_, zmq::socket_type::dealer) {}

  int run() {
    sock_.set(zmq::sockopt::linger, 200);
    sock_.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
    sock_.connect(o_.agent);
    send(wire::WorkerHello{o_.index, o_.device, uint32_t(getpid())});
    send(wire::WorkerStatus{o_.index, wire::WorkerState::ready});
    spdlog::info("ready on {}", o_.device);
    int64_t next_status = mono_ns();
    while (!done_ && !g_terminate) {
      zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(o_.heartbeat_ms));
      while (!done_ && (sock_.get(zmq::sockopt::events) & ZMQ_POLLIN)) handle_one();
      if (mono_ns() >= next_status) {  // liveness towards the agent
        send(wire::WorkerStatus{o_.index, state_});
        next_status = mono_ns() + o_.heartbeat_ms * 1'000'000;
      }
    }
    if (g_terminate) spdlog::info("terminated by signal");
    return 0;
  }

 private:
  template <class M>
  void send(const M& m) {
    (void)zmq::send_multipart(sock_, wire::encode(m), zmq::send_flags::dontwait);
  }

  void handle_one() {
    wire::Parts parts;
    if (!zmq::recv_multipart(sock_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    auto env = wire::open(parts);
    if (!env) {
      spdlog::warn("bad message from agent: {}", env.error().message());
      return;
    }
    using T = wire::MsgType;
    switch (env->type) {
      case T::step_begin:
        if (auto m = wire::decode<wire::StepBegin>(*env)) {
          // The training step runs here once the model lands; today a step is the vote itself.
          send(wire::StepVote{0, o_.index, m->epoch, m->step, true, ""});
        }
        break;
      case T::step_commit:
      case T::step_abort:
        if (state_ == wire::WorkerState::draining) stop("drained");
        break;
      case T::command:
        if (auto m = wire::decode<wire::Command>(*env)) {
          if (m->verb == wire::Verb::drain) {
            state_ = wire::WorkerState::draining;
            send(wire::WorkerStatus{o_.index, state_});
            stop("drained: " + m->reason);  // no step is ever half-done between messages
          } else {
            stop(m->reason);
          }
        }
        break;
      default:
        spdlog::warn("unexpected {} from agent", wire::type_name(env->type));
    }
  }

  void stop(const std::string& why) {
    state_ = wire::WorkerState::stopped;
    send(wire::WorkerStatus{o_.index, state_});
    spdlog::info("stopping: {}", why);
    done_ = true;
  }

  const WorkerOptions& o_;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  wire::WorkerState state_ = wire::WorkerState::ready;
  bool done_ = false;
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

// faults.cpp — see faults.h.
#include "runtime/faults.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace sal::runtime {

const char* fault_point_name(wire::FaultPoint p) {
  switch (p) {
    case wire::FaultPoint::forward: return "forward";
    case wire::FaultPoint::alltoall: return "alltoall";
    case wire::FaultPoint::allreduce: return "allreduce";
    case wire::FaultPoint::migration: return "migration";
    case wire::FaultPoint::snapshot: return "snapshot";
    case wire::FaultPoint::backward: return "backward";
    case wire::FaultPoint::count_: break;
  }
  return "?";
}

void FaultInjector::arm(const wire::FaultArm& f) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = f;
  spdlog::info("fault armed: die at {} of {}", fault_point_name(f.point),
               f.any_step ? std::string("the next occasion") : "step " + std::to_string(f.step));
}

void FaultInjector::at(wire::FaultPoint point, uint64_t step) {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!armed_ || armed_->point != point || (!armed_->any_step && armed_->step != step)) return;
    why = std::string("drill fault at ") + fault_point_name(point) + " of step " + std::to_string(step) +
          (armed_->reason.empty() ? "" : " (" + armed_->reason + ")");
  }
  die_as_node(why);
}

void die_as_node(const std::string& why) {
  spdlog::warn("{}: killing this node (agent pid {}) and this worker", why, getppid());
  spdlog::default_logger()->flush();
  ::kill(getppid(), SIGKILL);
  ::raise(SIGKILL);
  _exit(137);
}

}  // namespace sal::runtime

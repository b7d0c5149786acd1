// faults.cpp — see faults.h.
#include "runtime/faults.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "core/digest.h"
#include "wire/fault_points.h"

namespace sal::runtime {

const char* fault_point_name(wire::FaultPoint p) { return wire::fault_point_entry(p).name.data(); }

void FaultInjector::arm(const wire::FaultArm& f) {
  std::lock_guard<std::mutex> lock(mu_);
  if (f.point == wire::FaultPoint::corrupt) {
    corruption_ = f;
    spdlog::info("fault armed: flip {} bits of unit kind {} layer {} expert {} as step {} begins", f.bits, int(f.unit.kind),
                 f.unit.layer, f.unit.expert, f.any_step ? std::string("the next") : std::to_string(f.step));
    return;
  }
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

std::optional<wire::FaultArm> FaultInjector::take_corruption(uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!corruption_ || (!corruption_->any_step && corruption_->step != step)) return std::nullopt;
  return std::exchange(corruption_, std::nullopt);
}

namespace {

constexpr uint32_t kMantissaBits = 23;

// A step of a 64-bit pseudo-random sequence: an odd-constant increment, then the digest's
// bijective mixer (core/digest.h).
uint64_t next_random(uint64_t& state) {
  state += digest_detail::kLane;
  return digest_detail::mix(state);
}

}  // namespace

uint32_t flip_bits(std::vector<float>& w, uint32_t bits, uint64_t seed) {
  const uint64_t positions = uint64_t(w.size()) * kMantissaBits;
  std::set<uint64_t> chosen;
  uint64_t state = seed;
  while (chosen.size() < std::min<uint64_t>(bits, positions)) chosen.insert(next_random(state) % positions);
  for (uint64_t pos : chosen) {
    uint32_t word;
    float& x = w[size_t(pos / kMantissaBits)];
    std::memcpy(&word, &x, sizeof word);
    word ^= uint32_t(1) << (pos % kMantissaBits);
    std::memcpy(&x, &word, sizeof word);
  }
  return uint32_t(chosen.size());
}

void die_as_node(const std::string& why) {
  spdlog::warn("{}: killing this node (agent pid {}) and this worker", why, getppid());
  spdlog::default_logger()->flush();
  ::kill(getppid(), SIGKILL);
  ::raise(SIGKILL);
  _exit(137);
}

}  // namespace sal::runtime

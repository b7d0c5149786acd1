// trainer_digests.cpp — the Trainer's side of catching corruption (docs/health.md): the digest of
// every unit it holds, taken as a step begins, before the step's gradients leave it, for its vote
// (wire::StepVote.digests; the controller compares holders' digests, job/digests.h); and a drill's
// corrupt{} fault, which flips bits of one unit's weights just before those digests are taken.
//
// Digests are taken where the units are current in the host Params (a CPU worker's compute); a
// GPU worker's units live on its device, and digesting them there is not built yet: it votes none.
#include <spdlog/spdlog.h>

#include "core/digest.h"
#include "runtime/trainer.h"
#include "wire/unit_refs.h"

namespace sal::runtime {

namespace {

// Weights, then Adam's first and second moments, chained (core/digest.h).
uint64_t unit_digest(const model::Unit& u) {
  uint64_t h = digest_floats(u.w.data(), u.w.size());
  h = digest_floats(u.m.data(), u.m.size(), h);
  return digest_floats(u.v.data(), u.v.size(), h);
}

}  // namespace

bool Trainer::digests_due(uint64_t step) const {
  return spec_.digest_every > 0 && step % uint64_t(spec_.digest_every) == 0 && compute_->units_on_host();
}

std::vector<wire::UnitDigest> Trainer::unit_digests(uint64_t step) {
  std::vector<wire::UnitDigest> out;
  if (!digests_due(step)) return out;
  for (const model::Unit* u : params_.units()) {
    const long index = unit_index(spec_.dims, u->id);
    if (index >= 0) out.push_back({uint32_t(index), unit_digest(*u)});
  }
  return out;
}

void Trainer::arm_fault(const wire::FaultArm& f) {
  if (f.point == wire::FaultPoint::corrupt && !spec_.fault_injection) {
    spdlog::warn("a corruption of unit kind {} layer {} expert {} refused: the job does not allow fault injection "
                 "(faults = {{ inject = true }})", int(f.unit.kind), f.unit.layer, f.unit.expert);
    return;
  }
  faults_->arm(f);
}

// The corruption armed for this step, if any: `bits` bits of the unit's weights flipped, seeded
// by the unit and the step so a drill flips the same bits on every run.
void Trainer::corrupt_if_armed(uint64_t step) {
  auto f = faults_->take_corruption(step);
  if (!f) return;
  auto id = wire::unit_of(f->unit, spec_.dims);
  model::Unit* u = nullptr;
  if (id) {
    for (model::Unit* held : params_.units())
      if (held->id == *id) u = held;
  }
  if (!u || !compute_->units_on_host()) {
    spdlog::warn("drill corruption at step {} not carried out: {}", step,
                 !id ? id.error().message() : !u ? "this worker does not hold " + id->name()
                                                 : std::string("the units live on the device (GPU), not built"));
    return;
  }
  const uint64_t seed = (uint64_t(unit_index(spec_.dims, *id)) << 32) ^ step ^ (uint64_t(f->bits) << 56);
  const uint32_t flipped = flip_bits(u->w, f->bits, seed);
  spdlog::warn("drill fault: {} bits of {} flipped as step {} begins ({})", flipped, id->name(), step, f->reason);
}

}  // namespace sal::runtime

// digests.h — catching corruption before it spreads (docs/health.md): the pure logic that compares
// the unit digests the workers' votes carry (wire::StepVote.digests, taken as the step began) and
// decides what repairs a copy that disagrees.
//
// Steps are deterministic: every holder of a unit — each replica of an expert, every worker's copy
// of a non-expert unit — applies the same update to the same bits, so all must hold the same
// digest. Where they do not, the copy held by a strict majority of the unit's holders is the good
// one and the others ("odd") are repaired from it: the step is aborted before it commits, and the
// next plan (the same placement again) carries a transfer of the unit from a majority holder to
// each odd one, over the plan switch's migration path. With no strict majority (two holders that
// disagree, or a tie) there is nothing to tell the good copy by: the recovery ladder's restore
// brings the whole model back instead. A unit with one holder cannot be checked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/model_shape.h"
#include "job/plan_switch.h"
#include "plan/plan.h"
#include "wire/messages.h"

namespace sal::job {

// One unit whose holders disagree.
struct Disagreement {
  uint32_t unit = 0;                  // index in model_units()
  std::vector<Participant> majority;  // the holders of the majority's copy (empty: no majority)
  std::vector<Participant> odd;       // the others (with no majority: every holder)
  bool has_majority() const { return !majority.empty(); }
};

// Each voter's digests, by unit. Units reported by fewer than two voters are not compared.
using DigestVotes = std::map<Participant, std::vector<wire::UnitDigest>>;

// The units whose holders disagree, in unit order (empty: every copy agrees).
std::vector<Disagreement> compare_digests(const DigestVotes& votes);

// "layer0.expert3: worker 2.0 disagrees with the 2 other holders (1.0, 3.0)", or, with no
// majority, "layer0.expert3: its 2 holders (1.0, 2.0) disagree and none is a majority".
std::string describe(const Disagreement& d, const ModelShape& shape);

// A copy to repair: the unit, where a good copy is (the majority's holders), and who gets it.
struct Repair {
  uint32_t unit = 0;
  std::vector<Participant> from;
  std::vector<Participant> to;
};

// Adds to `sw` (a switch to `next`) a transfer of each repair's unit from a majority holder to each
// odd holder that is a rank of `next` and holds the unit under it, and makes every transfer of
// that unit that `sw` had from an odd holder come from a majority holder. Sources are spread over
// the majority's holders. Returns the transfers added; fails, naming the unit, when no majority
// holder is a rank of `next` (the good copy left with its workers).
Result<size_t> add_repairs(PlanSwitch& sw, const plan::Plan& next, const std::vector<Repair>& repairs,
                           const ModelShape& shape);

}  // namespace sal::job

// expert_grads.h — the gradient synchronisation of a step: every non-expert unit's gradient summed
// over every rank (sum_dense_gradients), and each replicated expert's among the ranks that hold it,
// and only those; then the global norm that clips the update (global_grad_norm). For every expert held by two or more ranks one holder is its root (the holders take turns
// down the list of such experts, so the summing is spread over the ranks); the other holders send
// their gradient to the root, the root adds them in ascending rank order and sends the sum back.
// Each of the two rounds is one exchange() with every message posted at once.
//
// Traffic: an expert held by h ranks moves 2 (h - 1) gradients, an expert held once none. (An
// all-reduce over all ranks, zeros where a rank holds nothing, would move every replicated expert
// through every rank.) Deterministic: the same holders give bit-identical sums, and every holder
// ends with the root's bytes, so replicas stay identical.
//
// The algorithm runs on any memory the Collectives can send from: host Params (a CPU worker, or a
// GPU worker staging through the host), or device memory over a device data plane (NCCL), where
// HolderGradients says where the gradients are, where a root receives, and how it sums.
#pragma once

#include <functional>
#include <vector>

#include "comm/collectives.h"
#include "core/result.h"
#include "model/params.h"
#include "runtime/dispatch.h"

namespace sal::runtime {

struct SharedExpert {
  int layer = 0, expert = 0;
  std::vector<int> holders;  // ascending ranks, two or more
  int root = 0;              // one of holders
};

// The experts held by two or more ranks in `replicas` ([layer] -> R[expert][rank]), in (layer,
// expert) order, with their roots. The same on every rank for the same plan.
std::vector<SharedExpert> shared_experts(const std::vector<Counts>& replicas);

// Sums the gradients of params' non-expert units over every rank of comm, in place, with one
// all-reduce of them concatenated in Params::non_expert_units() order.
Status sum_dense_gradients(comm::Collectives& comm, model::Params& params);

// Sums the gradients of `shared` among their holders, in place in params' expert units. `me` is
// this rank; params must hold every expert `me` is a holder of. Errors name the expert.
Status reduce_among_holders(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                            model::Params& params);

// The same on gradients anywhere (memory comm can send from and receive into).
struct HolderGradients {
  std::vector<float*> grads;  // [i]: shared[i]'s gradient on this rank; null where `me` is not a holder
  std::vector<size_t> sizes;  // [i]: its length in floats (any value where grads[i] is null)
  // Where the root `me` of shared[i] receives its k-th holder's part (k indexes holders; never
  // called for `me` itself); sizes[i] floats that stay valid until the call returns.
  std::function<Result<float*>(size_t i, size_t k)> inbox;
  // The root's sum: grads[i] = parts[0] + parts[1] + ... in that order, starting from +0
  // (parts[k] is the k-th holder's; `me`'s own is grads[i] itself, which the sum may overwrite).
  std::function<Status(size_t i, const std::vector<const float*>& parts)> sum;
  // Optional: called before each of the two exchanges (device memory: wait until the stream has
  // written what is about to be sent).
  std::function<Status()> before_exchange;
};
Status reduce_among_holders(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                            HolderGradients& g);

// After the sync: sqrt(sum of squares over every unit of the model, each expert once) — params'
// non-expert units (the same on every rank) plus its experts' shares, each divided by its number
// of holders in `replicas` ([layer] -> R[expert][rank] over comm's ranks), summed over comm.
Result<double> global_grad_norm(comm::Collectives& comm, const model::Params& params, const std::vector<Counts>& replicas);

}  // namespace sal::runtime

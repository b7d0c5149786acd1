// distributed_exchange.h — the distributed ExpertExchange: each MoE layer's tokens go to the workers holding
// replicas of their experts and come back, over the data plane.
//
// forward: count the local tokens per expert, all-gather the counts (T[e][j]) with the replica
// table's digest (gather_schedule), compute the flexible dispatcher's schedule (every worker computes
// the same one, so the all-to-all sizes agree without a check of their own), pack the rows for each
// destination into one contiguous buffer (destination by destination, expert by expert, tokens in
// order), all-to-all-v, run each held expert once on all the rows it received, and all-to-all-v the
// outputs back into the tokens' slots. backward sends the output gradients the same way, runs the
// experts' backward where they live (accumulating their weight gradients there) and returns the
// input gradients. Several replicas of one expert on a worker are one unit with more capacity.
// Shadowed experts (shadows.h, `shadows`): a layer whose step crowds its tokens onto a few experts
// sends those experts' weights to every rank with tokens for them (one all-to-all-v more in the
// forward), each computes its own, and the weight gradients go back to the expert's source (one
// more in the backward).
// A pass can be stopped (`stopping`): an aborted collective ends a pass at once, but a CPU worker's
// experts compute with no collective between them, so it is asked before each expert's block too.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "comm/collectives.h"
#include "model/exchange.h"
#include "model/expert.h"
#include "model/expert_replay.h"
#include "model/params.h"
#include "runtime/dispatch.h"
#include "runtime/shadows.h"

namespace sal::runtime {

class DistributedExchange : public model::ExpertExchange {
 public:
  // replicas[layer] = R[e][rank], the replica units of each expert on each rank.
  DistributedExchange(comm::Collectives& comm, model::Params& params, const std::vector<Counts>& replicas);

  Status global_stats(int layer, std::vector<double>& counts, std::vector<double>& prob_sums,
                      double& tokens) override;
  Status forward(int layer, const float* x, const model::Routing& r, float* out) override;
  Status backward(int layer, const float* d_out, float* dx) override;
  void note_combine(int layer, const float* dy, const float* w) override;

  // Each rank's weight in the dispatch of the experts' tokens (the step's shares; empty: even).
  std::vector<uint32_t> weights;
  Split split = Split::even;  // how each expert's tokens are split over its replicas (train.dispatch)
  // Shadow the experts a step crowds (train.shadow_experts). Every rank of the plane must agree (the
  // schedule's digest checks it). With `log`, a shadowed expert's rows are logged as sent to the
  // rank that computed them, which the replay reads as a shadow (model/expert_replay.h).
  bool shadows = false;
  // Called before every all-to-all, and as each layer's backward begins (a drill's fault points).
  std::function<void()> before_alltoall;
  std::function<void()> before_backward;
  // Asked as each layer's forward and backward begin and before each held expert's block: true ends
  // the pass with an error (stopped() then says so), so an aborted step, or a plan that needs the
  // worker, waits for one expert's work at most rather than the rest of the pass. Null: never.
  std::function<bool()> stopping;
  bool stopped() const { return stopped_; }
  // Where this pass's dispatch is logged (model/expert_replay.h: each layer's tokens — input rows,
  // combine gradients and weights — once, each expert's assignments in the order they left and the
  // ranks they went to); null: not logged.
  model::IterationLog* log = nullptr;
  uint32_t log_pass = 0;

  // The expert work this worker did so far (forward and backward): the rows its held experts
  // computed and the CPU time they took this thread (the health measurements weigh a worker's
  // time by its work).
  int64_t expert_rows() const { return expert_rows_; }
  double expert_cpu_ms() const { return expert_cpu_ms_; }

 private:
  struct LayerState {
    DispatchSchedule schedule;
    std::vector<std::vector<int>> slots;            // per expert: the local assignment slots, in order
    std::vector<int64_t> send_rows, recv_rows;      // per rank
    std::map<int, model::ExpertBlock> blocks;       // per held expert: the rows it computed
    ShadowPlan shadow;                              // the experts shadowed in this layer
    std::map<int, model::Unit> shadow_units;        // per expert computed here as a shadow: its weights, gradient
    int tokens = 0, k = 0;                          // the layer's routing
  };

  Status send_rows(LayerState& s, const float* rows_by_slot, std::vector<float>& recv);
  Status return_rows(LayerState& s, const std::vector<float>& computed, float* rows_by_slot);
  void count_work(const LayerState& s, int64_t cpu0);  // after run_experts() begun at thread CPU cpu0
  Status stop_point(int layer, const char* where);     // fails once `stopping` says so
  Status plan_shadows(int layer, LayerState& s);
  Status fetch_shadows(int layer, LayerState& s);
  Status return_shadow_grads(int layer, LayerState& s);
  Result<std::vector<float>> swap_floats(int layer, const char* what, const std::vector<float>& send,
                                         const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts);
  model::Unit* unit_for(int layer, LayerState& s, int e);  // the held unit, else the shadow's; null: neither
  // The log of this layer's forward: its tokens' input rows, each expert's assignments.
  void log_forward(int layer, const LayerState& s, const float* x);
  Status run_experts(int layer, LayerState& s, const std::vector<float>& recv, std::vector<float>& computed,
                     const float* d_out_recv);

  comm::Collectives& comm_;
  model::Params& params_;
  const std::vector<Counts>& replicas_;
  std::map<int, LayerState> layers_;
  int64_t expert_rows_ = 0;
  double expert_cpu_ms_ = 0;
  bool stopped_ = false;
};

}  // namespace sal::runtime

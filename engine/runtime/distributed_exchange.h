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
  // Called before every all-to-all, and as each layer's backward begins (a drill's fault points).
  std::function<void()> before_alltoall;
  std::function<void()> before_backward;
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
    int tokens = 0, k = 0;                          // the layer's routing
  };

  Status send_rows(LayerState& s, const float* rows_by_slot, std::vector<float>& recv);
  Status return_rows(LayerState& s, const std::vector<float>& computed, float* rows_by_slot);
  void count_work(const LayerState& s, int64_t cpu0);  // after run_experts() begun at thread CPU cpu0
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
};

}  // namespace sal::runtime

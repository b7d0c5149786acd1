// moetion.h — MoEtion's sparse-checkpoint window search (Gandhi & Kozyrakis, "Sparse Checkpointing
// for MoE at Scale", Algorithm 1; public code "MoEvement").
//
// Every operator (each expert of each layer, each layer's gate and non-expert part, the embeddings)
// is snapshotted in full once per window of W_sparse iterations. In the iteration that holds an
// operator "active", its full state (master weights + optimizer state) goes to host memory; the
// other operators contribute only their compute weights. The cost model (the paper's) charges
// every iteration the full state of its active operators plus the compute weights of all others,
// and that snapshot must cross the host link (PCIe) within one iteration: bytes ≤ time × bandwidth.
//
// Operators are scheduled in ascending popularity (least-activated experts first: they change least
// between snapshots), non-expert operators last, in consecutive runs: iteration i holds a
// contiguous run of that order. The window is the fewest iterations such runs can fit in; among the
// schedules with that many iterations we take the one with the smallest largest snapshot. The paper
// sizes runs equally (ops per iteration stepped down until the snapshot fits); greedy packing of
// the same order never needs more iterations and often needs fewer.
//
// The reorder trigger: recompute the order when at least 25 % of experts changed their activation
// frequency by more than 10 % (relative to the frequency the current order was built from).
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"

namespace sal::algo {

struct CheckpointOperator {
  uint64_t full_bytes = 0;     // full state: master weights and optimizer moments (≥ compute_bytes)
  uint64_t compute_bytes = 0;  // compute (training-precision) weights
  double popularity = 0;       // activation frequency; orders the experts
  bool expert = true;          // non-expert operators go last, in the order given
};

struct WindowSchedule {
  int window = 0;                            // W_sparse, in iterations
  std::vector<int> order;                    // operator indices in scheduling order
  std::vector<std::vector<int>> iterations;  // `window` runs of `order`; every operator once
  std::vector<uint64_t> snapshot_bytes;      // per iteration, under the cost model above
  double budget_bytes = 0;                   // iteration time × bandwidth
};

// Ascending popularity for experts (ties by index), then non-experts in index order.
std::vector<int> popularity_order(const std::vector<CheckpointOperator>& operators);

// The smallest window and its schedule. Errors when there is no operator, an operator's full state
// is smaller than its compute weights, a time or bandwidth is not positive, or not even one
// operator per iteration fits (its full state plus everyone's compute weights exceed the budget).
Result<WindowSchedule> find_window(const std::vector<CheckpointOperator>& operators,
                                   double iteration_seconds, double bandwidth_bytes_per_second);

struct ReorderTrigger {
  double change = 0.10;    // an expert changed when |after − before| > change · before
  double fraction = 0.25;  // reorder when at least this fraction of experts changed
};

struct ReorderCheck {
  int changed = 0;
  int experts = 0;
  bool reorder = false;
};

// Compares per-expert activation frequencies before/after (same length). An expert with frequency 0
// before counts as changed when it is active after.
Result<ReorderCheck> check_reorder(const std::vector<double>& before,
                                   const std::vector<double>& after,
                                   const ReorderTrigger& trigger = {});

}  // namespace sal::algo

// routing_trace.h — a recorded expert-load trace replayed as the model's routing, for experiments
// on real loads (model.routing_trace; like SmartMoE's file gate): instead of the gate's top-k, each
// step's token-to-expert counts are the trace's, layer by layer, moving through the trace's files.
//
// The trace: per file (an iteration of the recorded run, in order; the files of an iteration's ranks
// summed into one) and recorded layer, each expert's count (core/load_files.h reads CSV and the
// SmartMoE format). Step s uses file
// (s / every) mod files; model layer l uses recorded layer l * recorded_layers / layers (evenly
// spaced). The counts are scaled to the step: the global batch's N tokens make N * k assignments,
// apportioned over the experts in proportion to the recorded counts (core/apportion.h), no expert
// above N (a token picks an expert once; the excess goes to the others in proportion). So every
// step's global counts are the trace's exactly, not a sample of them.
//
// Which tokens: the assignments, sorted by expert, are read as k columns of N rows (row r takes
// assignments r, r + N, ..., r + (k-1) N: k different experts, as no expert has more than N), and
// token g of the global batch takes row (a g + b) mod N, with a coprime to N and a, b hashed from
// the step and layer. A token's experts depend on its place in the global batch alone, so any split
// of the batch over workers routes alike (the CPU and GPU models both use it). The combine weights
// stay the gate's probabilities of the experts so chosen (as with model.skew).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::model {

class RoutingTrace {
 public:
  using Layers = std::vector<std::vector<double>>;  // [recorded layer][expert]

  // From per-file loads (each file's layers with `experts` counts each) for a model of `layers`
  // layers; `every` steps per file (>= 1). `what` names the trace in errors.
  static Result<RoutingTrace> make(std::vector<Layers> files, int layers, int experts, int64_t every,
                                   const std::string& what);
  // Reads a file or a directory of them (core/load_trace.h: each rank's file of a step summed).
  static Result<RoutingTrace> load(const std::string& path, int layers, int experts, int64_t every);

  // The recorded steps replayed (a file each, or a step's ranks summed), and what they were read from.
  size_t files() const { return files_.size(); }
  const std::string& source() const { return source_; }
  // The file step `step` replays.
  size_t file_of(uint64_t step) const;

  // Global assignment counts of model layer `layer` at `step` for N tokens of k experts each.
  std::vector<uint64_t> counts(uint64_t step, int layer, uint64_t N, int k) const;

  // The k experts of global tokens [first, first + n) of a batch of N, into idx[n * k].
  void route(uint64_t step, int layer, uint64_t N, int k, uint64_t first, int n, int32_t* idx) const;

 private:
  std::vector<Layers> files_;
  int layers_ = 0;
  int64_t every_ = 1;
  std::string source_;
};

}  // namespace sal::model

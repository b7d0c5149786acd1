// load_trace.h — a trace of expert loads: the one load file a path names, or a directory of them,
// read whole as the steps of a recorded run (core/load_files.h reads each file). A directory's files
// are ordered by their step numbers, and the files of one step that name their ranks are summed:
// SmartMoE's dataset has a file per iteration and rank (table_iter<N>_rank<R>.log, each rank's own
// micro-batches' counts), and the step that rank's counts were part of is their sum over the ranks
// — the global batch's counts, which is what a placement is judged on and a replay routes.
//
// In a file's name (case ignored): the step is the number after "iter", "iteration" or "step" (a
// '_' or '-' between them allowed), else its first number that is not a rank, else none (-1); the
// rank is the number after "rank". Files without a rank are a step each (train.record_routing's
// table_iter<step>.log), ties by name. Hidden files (".name") are not read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal {

// One step of a trace: its number in the files' names (-1: none), the files read for it (several:
// the ranks of one iteration, in rank order), and its counts per layer and expert.
struct LoadStep {
  int64_t number = -1;
  std::vector<std::string> files;
  std::vector<int64_t> ranks;  // the files' ranks, as many as files; empty for a file without one
  std::vector<std::vector<double>> loads;
};

// A file's step and rank as named (-1 where the name has none).
struct TraceName {
  int64_t step = -1;
  int64_t rank = -1;
};
TraceName trace_name_of(const std::string& file_name);

// The trace `path` names, in step order. Errors (naming the files): an empty directory, a file that
// does not read as loads, two files of one step with the same rank, ranks of one step whose layers
// or experts differ.
Result<std::vector<LoadStep>> read_load_trace(const std::string& path);

// What a trace was read from, for a log line: "a.log", "101 files, a step each", "80 files: 5 steps
// of 16 ranks", "79 files: 5 steps of 16 ranks (step 1001: 15)".
std::string describe_trace(const std::vector<LoadStep>& steps);

}  // namespace sal

// run_summary.h — what a run shows of itself, the same for `salamander run` (a local mesh) and a
// standalone `salamander controller` (remote agents): the live progress line, the summary object
// (--json, summary.json), the text summary printed at the end, and the files written into the run
// directory (summary.json, report.html).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "drill/runner.h"
#include "mesh/controller.h"

namespace sal::cli {

// The run as the summary sees it; the controller is read, never changed.
struct RunView {
  const mesh::Controller& controller;
  int64_t steps_target = 0;  // 0: idle (no steps)
  int64_t started_ns = 0;
  int64_t finished_ns = 0;   // 0: still running
  std::string run_dir;
  std::string stop_reason;
  int exit_code = 0;
  std::string drill;                                      // its name, or "" for none
  std::optional<double> cpu_share;                        // --cpu-share in force
  std::vector<drill::ExpectationResult> expectations;     // a drill's, once checked
};

// "[  12.3s] step 120/600 · loss 3.912 · 18402 tok/s · 4 workers · running · plan 2 · epoch 5 · nodes 4/4 alive"
std::string status_line(const RunView& v);
// Its nodes part: "4/4 alive" out of the job's mesh.nodes, "6 alive (mesh.nodes = 4)" when nodes
// joined beyond them (a drill's trace, agents started by hand).
std::string nodes_alive(size_t live, int64_t mesh_nodes);

// The summary object: job, steps, losses, throughput, recoveries, nodes, where the checkpoint is.
nlohmann::ordered_json run_summary(const RunView& v);

// The lines printed after the progress line: how it ended, the loss, recoveries, the drill's
// expectations, the failure if any, where the checkpoint and the report are.
void print_text_summary(const RunView& v, const nlohmann::ordered_json& j);

// summary.json and report.html into the run directory.
Status write_run_outputs(const RunView& v, const nlohmann::ordered_json& j);

}  // namespace sal::cli

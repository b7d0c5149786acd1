// load_files.h — expert loads from files: for offline planning (`salamander policy plan|recovery
// --loads FILE`), the simulator's replayed loads and a job's replayed routing (model.routing_trace);
// a live job records its routing in the SmartMoE format (train.record_routing).
// Two formats are read: CSV with one line per layer and one token count per expert, and the
// SmartMoE trace format, one line per layer "<layer>:[[counts of micro-batch 1], [...], ...]",
// whose micro-batches are summed.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace sal {

Result<std::vector<std::vector<double>>> read_load_file(const std::string& path);
// The same from the file's text; `path` names it in errors.
Result<std::vector<std::vector<double>>> parse_loads(const std::string& text, const std::string& path);

// A trace: the files of a directory ordered by the number in their names ("table_iter1051_rank0.log"
// is iteration 1051; ties by name), or the one file `path` names. Errors: an empty directory.
Result<std::vector<std::string>> load_trace_files(const std::string& path);

// One layer's line in the SmartMoE format, "<layer>:[[c0, c1, ...]]" (one micro-batch), no newline.
std::string trace_line_of(size_t layer, const std::vector<uint64_t>& counts);

}  // namespace sal

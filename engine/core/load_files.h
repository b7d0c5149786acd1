// load_files.h — expert loads from files: for offline planning (`salamander policy plan|recovery
// --loads FILE`), the simulator's replayed loads and a job's replayed routing (model.routing_trace);
// a live job records its routing in the SmartMoE format (train.record_routing). A directory of them,
// a trace, is core/load_trace.h's.
// Three formats are read: CSV with one line per layer and one token count per expert (as
// spreadsheets and scripts write it: commas, else ';', else tabs or spaces; quotes, a byte order
// mark, a trailing separator and a first line of column names taken in stride; a first column of
// layer labels — named "layer", "layer_id", "index", "id" (and the like) or nothing in the header,
// or a label such as "layer0" before each row's counts — dropped), the SmartMoE trace format, one
// line per layer "<layer>:[[counts of micro-batch 1], [...], ...]", whose micro-batches are summed
// ("<layer>:[counts]" is one) and whose lines are taken in the order of their labels (each layer
// once, the labels consecutive, in any order in the file), and a JSON array of layers, [[counts of
// layer 0], ...], an object of them, {"layer0": [counts], ...}, ordered by the number in their
// names, or an object of one such array, {"layers": [[...], ...]}.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace sal {

Result<std::vector<std::vector<double>>> read_load_file(const std::string& path);
// The same from the file's text; `path` names it in errors.
Result<std::vector<std::vector<double>>> parse_loads(const std::string& text, const std::string& path);

// One layer's line in the SmartMoE format, "<layer>:[[c0, c1, ...]]" (one micro-batch), no newline.
std::string trace_line_of(size_t layer, const std::vector<uint64_t>& counts);

}  // namespace sal

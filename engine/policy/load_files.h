// load_files.h — expert loads from files, for offline planning (`salamander policy plan|recovery
// --loads FILE`) and the simulator's replayed loads.
// Two formats are read: CSV with one line per layer and one token count per expert, and the
// SmartMoE trace format, one line per layer "<layer>:[[counts of micro-batch 1], [...], ...]",
// whose micro-batches are summed.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace sal::policy {

Result<std::vector<std::vector<double>>> read_load_file(const std::string& path);
// The same from the file's text; `path` names it in errors.
Result<std::vector<std::vector<double>>> parse_loads(const std::string& text, const std::string& path);

}  // namespace sal::policy

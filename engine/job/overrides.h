// overrides.h — `--set PATH=VALUE,...` for a job file (run, controller, job check): each override
// sets one key of the table the job file returns, before the schema checks it, so a wrong key or a
// wrong value gets the schema's own message ("train.lr: expected a number > 0, got ..."). The
// overrides are written into the job's text — the original text, untouched and on the same lines,
// wrapped in a function, then one assignment per override — so they travel wherever the job text
// goes (agents, workers, the run directory, the journal) with nothing else to carry.
//
// PATH: dot-separated Lua identifiers (train.lr, model.d_model); missing tables on the way are
// created. VALUE: true / false, a number, a quoted string ('...' or "..."), or else the bare text
// as a string (policies.placement=mro). A value may contain commas: the command line's list splits
// only at a comma that starts the next PATH= (cli::key_values), so mesh.devices=cuda:0,1 is one value.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace sal::job {

using Overrides = std::vector<std::pair<std::string, std::string>>;

// The job text with `sets` applied (the text itself when there are none). Errors name the
// override and the rule broken (a path that is not dot-separated identifiers).
Result<std::string> apply_overrides(const std::string& text, const Overrides& sets);

}  // namespace sal::job

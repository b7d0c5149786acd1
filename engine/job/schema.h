// schema.h — internal to engine/job: checks the table a job file returned against the schema.
#pragma once

#include <lua.hpp>

#include "job/config.h"

namespace sal::job {

// Fills `job` from the table at idx; errors name the key path and the rule broken, one line per
// error, every error in the table at once.
Status validate_table(lua_State* L, int idx, JobConfig& job);

}  // namespace sal::job

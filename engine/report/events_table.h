// events_table.h — the run report's table of every event, paged and filtered in the page: each row
// carries its kind (data-kind) and its group (class failure, stop, recovery or action); a small
// inline script (no external assets, nothing fetched) shows kEventsPerPage rows at a time with
// previous/next buttons, a choice of kind or group, and a text filter. Without scripts the whole
// table shows.
#pragma once

#include <string>
#include <vector>

#include "report/run_files.h"

namespace sal::report {

inline constexpr int kEventsPerPage = 25;

// The row's group, its CSS class: "failure", "stop", "recovery", "action" (drill actions, policy
// swaps, restores begun) or "" for the rest.
std::string event_group(const EventRow& e);

// One <option> per group present and per kind (with its count), after "every event (N)".
std::string event_filter_options(const std::vector<EventRow>& events);

// The section: heading, caption, controls, table and script; "" when there are no events.
std::string events_section(const std::vector<EventRow>& events);

}  // namespace sal::report

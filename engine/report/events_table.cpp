// events_table.cpp — see events_table.h. The script finds its elements by id (one events table per
// page) and only hides and shows rows; every text in the page was escaped when it was written.
#include "report/events_table.h"

#include <map>

#include "report/html.h"
#include "report/run_report.h"

namespace sal::report {
namespace {

struct Group {
  const char* name;   // CSS class and filter value after '@'
  const char* label;  // in the filter
};
const Group kGroups[] = {{"failure", "failures"},
                         {"recovery", "recoveries"},
                         {"stop", "the stop"},
                         {"action", "drill actions, policy swaps, restores"}};

const char* kScript = R"(<script>
(function () {
  var table = document.getElementById('ev-table');
  var rows = Array.prototype.slice.call(table.querySelectorAll('tr[data-kind]'));
  var kind = document.getElementById('ev-kind'), text = document.getElementById('ev-text');
  var pager = document.getElementById('ev-pager');
  var prev = document.getElementById('ev-prev'), next = document.getElementById('ev-next');
  var size = PER_PAGE, page = 0;
  function wanted(r) {
    var k = kind.value, t = text.value.toLowerCase();
    if (k.charAt(0) === '@' && !r.classList.contains(k.slice(1))) return false;
    if (k && k.charAt(0) !== '@' && r.getAttribute('data-kind') !== k) return false;
    return !t || r.textContent.toLowerCase().indexOf(t) >= 0;
  }
  function draw() {
    var match = rows.filter(wanted), pages = Math.max(1, Math.ceil(match.length / size));
    page = Math.max(0, Math.min(page, pages - 1));
    rows.forEach(function (r) { r.hidden = true; });
    match.slice(page * size, (page + 1) * size).forEach(function (r) { r.hidden = false; });
    var first = match.length ? page * size + 1 : 0, last = Math.min(match.length, (page + 1) * size);
    var all = match.length < rows.length ? ' (' + rows.length + ' in all)' : '';
    pager.textContent = 'rows ' + first + '\u2013' + last + ' of ' + match.length + all +
        ' \u00b7 page ' + (page + 1) + ' of ' + pages;
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }
  kind.onchange = text.oninput = function () { page = 0; draw(); };
  prev.onclick = function () { page -= 1; draw(); };
  next.onclick = function () { page += 1; draw(); };
  document.getElementById('ev-controls').hidden = false;
  draw();
})();
</script>
)";

std::string script() {
  std::string s = kScript;
  s.replace(s.find("PER_PAGE"), 8, std::to_string(kEventsPerPage));
  return s;
}

std::string option(const std::string& value, const std::string& label) {
  return "<option value=\"" + escape(value) + "\">" + escape(label) + "</option>";
}

std::string controls(const std::vector<EventRow>& events) {
  return "<div id=\"ev-controls\" class=\"controls\" hidden>\n<label>show <select id=\"ev-kind\">" +
         event_filter_options(events) +
         "</select></label>\n<label>containing <input id=\"ev-text\" type=\"search\" size=\"24\"></label>\n"
         "<button id=\"ev-prev\" type=\"button\">‹ previous</button> <span id=\"ev-pager\" class=\"pager\"></span> "
         "<button id=\"ev-next\" type=\"button\">next ›</button>\n</div>\n";
}

// A node as the table names it: its id and its name (its agent's, which also names its log file).
std::string node_cell(const EventRow& e, const std::map<std::string, std::string>& names) {
  auto it = names.find(e.node);
  return it == names.end() ? e.node : e.node + " " + it->second;
}

std::string rows_html(const std::vector<EventRow>& events) {
  std::string out = "<table id=\"ev-table\">\n<tr><th>time (s)</th><th>kind</th><th>node</th><th>detail</th></tr>\n";
  auto names = node_names(events);
  for (const auto& e : events) {
    std::string group = event_group(e);
    out += "<tr data-kind=\"" + escape(e.kind) + "\"" + (group.empty() ? "" : " class=\"" + group + "\"") + "><td>" +
           num(e.time_s, 3) + "</td><td>" + escape(e.kind) + "</td><td>" + escape(node_cell(e, names)) + "</td><td>" +
           escape(e.detail) + "</td></tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

std::string event_group(const EventRow& e) {
  if (is_stop(e)) return "stop";
  if (is_failure(e)) return "failure";
  if (e.kind == "recovered" || e.kind == "restored") return "recovery";
  if (e.kind == "drill" || e.kind == "drill_error" || e.kind == "policy_loaded" || e.kind == "policy_rollback" ||
      e.kind == "restore_begun")
    return "action";
  return "";
}

std::string event_filter_options(const std::vector<EventRow>& events) {
  std::map<std::string, size_t> groups, kinds;
  for (const auto& e : events) {
    ++kinds[e.kind];
    if (auto g = event_group(e); !g.empty()) ++groups[g];
  }
  std::string out = option("", "every event (" + std::to_string(events.size()) + ")");
  for (const Group& g : kGroups)
    if (groups.count(g.name))
      out += option(std::string("@") + g.name, std::string(g.label) + " (" + std::to_string(groups[g.name]) + ")");
  for (const auto& [kind, n] : kinds) out += option(kind, kind + " (" + std::to_string(n) + ")");
  return out;
}

std::string events_section(const std::vector<EventRow>& events) {
  if (events.empty()) return "";
  return section("Events", controls(events) + rows_html(events) + script(),
                 "Every event the controller logged, on the same clock as the plots (failures red, recoveries "
                 "green, the stop grey), " +
                     std::to_string(kEventsPerPage) + " to a page; choose a kind or a group, or type to filter.");
}

}  // namespace sal::report

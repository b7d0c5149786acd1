// test_architecture.cpp — docs/architecture.md kept true by the code it describes: every event and
// action type of the job driver (engine/job/driver_io.h), every phase (driver_phases.h) and every
// row of the transition table (driver_table.cpp: phase, event, timer, handler and the phases it may
// move to) appear on the page, the page lists no row the table does not have, and every path the
// page names exists. Adding an event, a phase or a row without the page fails here, naming it.
#include <doctest/doctest.h>
#include <glob.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read(const std::string& rel) {
  std::ifstream f(std::string(SAL_SOURCE_DIR) + "/" + rel);
  REQUIRE_MESSAGE(f.good(), "cannot read " << rel);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The text between `from` and `to` (both must be there).
std::string between(const std::string& text, const std::string& from, const std::string& to) {
  auto a = text.find(from);
  REQUIRE_MESSAGE(a != std::string::npos, "no '" << from << "'");
  auto b = text.find(to, a + from.size());
  REQUIRE_MESSAGE(b != std::string::npos, "no '" << to << "' after '" << from << "'");
  return text.substr(a + from.size(), b - a - from.size());
}

std::vector<std::string> all(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

std::string without_comments(const std::string& code) { return std::regex_replace(code, std::regex("//[^\n]*"), ""); }

std::string trim(std::string s) {
  auto a = s.find_first_not_of(" `");
  auto b = s.find_last_not_of(" `");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::set<std::string> words(const std::string& list) {
  std::set<std::string> out;
  for (const auto& w : all(list, "([a-z_]+)"))
    if (w != "to") out.insert(w);
  return out;
}

// A row of the transition table, as the code has it or as the page says it.
struct Row {
  std::string phase, event, timer, handler;
  std::set<std::string> to;
  std::string key() const { return phase + " " + event + " " + timer + " " + handler; }
};

// driver_table.cpp's rows, with the event kinds named as driver_io.h's events and the "to"
// expressions' named sets expanded.
std::vector<Row> code_rows() {
  const std::string io = read("engine/job/driver_io.h");
  const std::string table = without_comments(read("engine/job/driver_table.cpp"));
  auto events = all(between(io, "using Event = std::variant<", ">;"), "in::(\\w+)");
  auto kinds = all(between(table, "enum class On : uint8_t {", "};"), "(\\w+)");
  REQUIRE(kinds.size() == events.size());
  std::map<std::string, std::string> event_of;
  for (size_t i = 0; i < kinds.size(); ++i) event_of[kinds[i]] = events[i];
  std::map<std::string, std::set<std::string>> named;
  std::regex constant("constexpr To (k\\w+) = to\\(\\{([^}]*)\\}\\);");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), constant); it != std::sregex_iterator(); ++it)
    named[(*it)[1]] = words((*it)[2]);
  std::vector<Row> rows;
  std::regex row("\\{(\\w+),\\s*On::(\\w+),\\s*(\\{\\}|T::(\\w+)),\\s*&Driver::(\\w+),\\s*([^\\n]*?)\\},?\\s*\\n");
  std::string body = between(table, "kTable[] = {", "\n  };") + "\n";
  for (auto it = std::sregex_iterator(body.begin(), body.end(), row); it != std::sregex_iterator(); ++it) {
    Row r{(*it)[1], event_of[(*it)[2]], (*it)[4], (*it)[5], {}};
    for (const auto& token : all((*it)[6].str(), "(\\w+)")) {
      if (named.count(token)) r.to.insert(named[token].begin(), named[token].end());
      else if (token != "to" && token != "To" && token != "0") r.to.insert(token);
    }
    rows.push_back(r);
  }
  return rows;
}

// The page's table: | phase | `Event` | `timer` | `handler` | to, ... | what happens |
std::vector<Row> page_rows(const std::string& page) {
  std::string table = between(page, "### The transition table", "\n\n##");
  std::vector<Row> rows;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0 || line.find("| phase |") == 0 || line.find("| ---") == 0) continue;
    std::vector<std::string> cells;
    std::istringstream cs(line.substr(1));
    for (std::string c; std::getline(cs, c, '|');) cells.push_back(trim(c));
    REQUIRE_MESSAGE(cells.size() >= 5, "a row of the page's table without five cells: " << line);
    Row r{cells[0], cells[1], cells[2], cells[3], cells[4] == "—" ? std::set<std::string>{} : words(cells[4])};
    rows.push_back(r);
  }
  return rows;
}

std::string names(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "—" : out;
}

// A path the page names, resolved as a glob: repository-relative when it starts with a top-level
// folder, else under engine/.
bool exists(const std::string& path) {
  static const std::set<std::string> kTop = {"engine", "tests", "kernels", "repl", "scripts", "policies", "docs", "cmake"};
  std::string first = path.substr(0, path.find('/'));
  std::string full = std::string(SAL_SOURCE_DIR) + "/" + (kTop.count(first) ? "" : "engine/") + path;
  glob_t g{};
  int rc = glob(full.c_str(), 0, nullptr, &g);
  size_t found = g.gl_pathc;
  globfree(&g);
  return rc == 0 && found > 0;
}

}  // namespace

TEST_CASE("docs/architecture.md names every event and action of the job driver") {
  const std::string page = read("docs/architecture.md");
  const std::string io = read("engine/job/driver_io.h");
  auto events = all(between(io, "using Event = std::variant<", ">;"), "in::(\\w+)");
  auto actions = all(between(io, "using Action = std::variant<", ">;"), "act::(\\w+)");
  REQUIRE(events.size() >= 10);
  REQUIRE(actions.size() >= 15);
  for (const auto& e : events) CHECK_MESSAGE(page.find("`" + e + "`") != std::string::npos, "event " << e << " is not on the page");
  for (const auto& a : actions) CHECK_MESSAGE(page.find("`" + a + "`") != std::string::npos, "action " << a << " is not on the page");
}

TEST_CASE("docs/architecture.md names every phase of the job driver") {
  const std::string page = read("docs/architecture.md");
  const std::string phases_table = between(page, "### Phases", "###");
  auto phases = all(between(read("engine/job/driver_phases.h"), "using State = std::variant<", ">;"), "phase::(\\w+)");
  REQUIRE(phases.size() >= 8);
  for (auto p : phases) {
    for (auto& c : p) c = char(std::tolower(c));
    CHECK_MESSAGE(phases_table.find("| `" + p + "` |") != std::string::npos, "phase " << p << " is not in the page's phases");
  }
}

TEST_CASE("docs/architecture.md's transition table is the code's, row by row, with the phases each may move to") {
  const std::string page = read("docs/architecture.md");
  auto code = code_rows();
  auto listed = page_rows(page);
  REQUIRE(code.size() >= 20);
  std::map<std::string, Row> by_key;
  for (const auto& r : listed) by_key[r.key()] = r;
  for (const auto& r : code) {
    auto it = by_key.find(r.key());
    CHECK_MESSAGE(it != by_key.end(), "the table's row (" << r.key() << ") is not on the page");
    if (it != by_key.end())
      CHECK_MESSAGE(it->second.to == r.to, "row (" << r.key() << "): the page says it moves to " << names(it->second.to)
                                                  << ", the table " << names(r.to));
  }
  std::set<std::string> keys;
  for (const auto& r : code) keys.insert(r.key());
  for (const auto& r : listed) CHECK_MESSAGE(keys.count(r.key()), "the page lists a row the table does not have: " << r.key());
}

TEST_CASE("every path docs/architecture.md names exists") {
  const std::string page = read("docs/architecture.md");
  static const std::set<std::string> kFolders = {"engine", "tests",  "kernels", "repl",  "scripts", "policies", "docs",
                                                 "core",   "wire",   "lua",     "job",   "policy",  "plan",     "mesh",
                                                 "console", "metrics", "model", "comm",  "runtime", "ckpt",     "sim",
                                                 "drill",  "report", "cli"};
  size_t checked = 0;
  for (const auto& token : all(page, "`([A-Za-z0-9_.*/-]+)`")) {
    auto slash = token.find('/');
    if (slash == std::string::npos || !kFolders.count(token.substr(0, slash))) continue;
    ++checked;
    CHECK_MESSAGE(exists(token), "the page names " << token << ", which does not exist");
  }
  CHECK(checked >= 60);
}

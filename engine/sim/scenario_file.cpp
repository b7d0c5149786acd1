// scenario_file.cpp — a scenario file as written: the Lua file is run in a sandbox (as job files
// are), its table becomes JSON; `--set` overrides and sweep values are applied to that JSON by
// path before a point is read (scenario.cpp). A --set of a swept field narrows the sweep to it.
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "lua/convert.h"
#include "lua/sandbox.h"
#include "sim/fields.h"
#include "sim/scenario.h"

namespace sal::sim {
namespace {

constexpr size_t kScenarioMemoryLimit = 64u << 20;
constexpr int64_t kScenarioBudgetMs = 5000;
// Values a scenario table may have: a scenario is a few dozen fields, sweeps and traces included.
constexpr size_t kScenarioValues = size_t(1) << 20;

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, ": cannot read the scenario file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<nlohmann::json> eval_lua(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.error();
  lua::Sandbox sb({.name = "scenario " + path, .memory_limit = kScenarioMemoryLimit});
  if (auto s = sb.load(*text, "@" + path); !s) return fail(path, ": ", s.error().message());
  nlohmann::json j;
  auto s = sb.run(1, 0, {.deadline_ms = kScenarioBudgetMs, .what = "scenario budget"}, [&](lua_State* L) -> Status {
    lua_call(L, 0, 1);
    if (!lua_istable(L, -1)) return fail("a scenario must return a table (return { cluster = ..., ... })");
    auto v = scenario_json(L, -1);
    if (!v) return v.error();
    j = std::move(*v);
    return {};
  });
  if (!s) return fail(path, ": ", s.error().message());
  return j;
}

}  // namespace

Result<nlohmann::json> scenario_json(lua_State* L, int idx) {
  lua::Meter m(L, {.what = "the scenario", .values = {kScenarioValues, "a scenario's limit"}});
  auto j = lua::to_json(L, idx, m);
  if (!j) return j.error();
  return nlohmann::json(std::move(*j));
}

namespace {

// A JSON value, or a bare word as a string.
nlohmann::json parse_value(const std::string& text) {
  auto v = nlohmann::json::parse(text, nullptr, false);
  return v.is_discarded() ? nlohmann::json(text) : v;
}

Status read_axes(const nlohmann::json& sweep, std::vector<SweepAxis>& out) {
  if (!sweep.is_array()) return fail("sweep: must be a list of {param = \"a.b\", values = {...}}");
  for (size_t i = 0; i < sweep.size(); ++i) {
    Fields f(sweep[i], "sweep[" + std::to_string(i + 1) + "]");
    SweepAxis a;
    if (auto s = f.text("param", a.param); !s) return s;
    const auto* values = f.raw("values");
    if (a.param.empty()) return fail(f.path("param"), ": required (e.g. \"failures.per_hour\")");
    if (!values || !values->is_array() || values->empty()) return fail(f.path("values"), ": must be a non-empty list");
    a.values.assign(values->begin(), values->end());
    if (auto s = f.finish(); !s) return s;
    out.push_back(std::move(a));
  }
  return {};
}

Status read_table_spec(const nlohmann::json& t, ScenarioFile& f) {
  Fields fs(t, "table");
  if (auto s = fs.text("metric", f.metric); !s) return s;
  if (auto s = fs.text("normalise_to", f.normalise_to); !s) return s;
  return fs.finish();
}

Status set_at(nlohmann::json& node, const std::vector<std::string>& parts, size_t i, const nlohmann::json& value,
              const std::string& param) {
  const std::string& key = parts[i];
  bool last = i + 1 == parts.size();
  if (key == "*") {
    if (!node.is_array()) return fail(param, ": '*' needs a list here");
    for (auto& item : node) {
      if (item.is_string()) item = nlohmann::json{{"kind", item}};
      if (last) return fail(param, ": '*' cannot be the last part");
      if (auto s = set_at(item, parts, i + 1, value, param); !s) return s;
    }
    return {};
  }
  if (node.is_array() && node.empty()) node = nlohmann::json::object();
  if (node.is_null()) node = nlohmann::json::object();
  if (!node.is_object()) return fail(param, ": '", key, "' is inside a value that is not a table");
  if (last) {
    node[key] = value;
    return {};
  }
  return set_at(node[key], parts, i + 1, value, param);
}

// A --set of a field the scenario's sweep varies: the sweep is narrowed to that one value (else
// every point would overwrite the --set); the note says what was replaced.
std::optional<std::string> narrow_sweep(nlohmann::json& spec, const std::string& param, const nlohmann::json& value,
                                        const std::string& text) {
  auto sweep = spec.find("sweep");
  if (sweep == spec.end() || !sweep->is_array()) return std::nullopt;
  for (auto& axis : *sweep) {
    if (!axis.is_object() || axis.value("param", nlohmann::json()) != param) continue;
    std::string was;
    for (const auto& v : axis.value("values", nlohmann::json::array())) was += (was.empty() ? "" : ", ") + v.dump();
    axis["values"] = nlohmann::json::array({value});
    return "--set " + param + "=" + text + " replaces the scenario's sweep over " + param + " (" + was + ")";
  }
  return std::nullopt;
}

}  // namespace

Status set_param(nlohmann::json& spec, const std::string& param, const nlohmann::json& value) {
  std::vector<std::string> parts;
  std::stringstream ss(param);
  for (std::string p; std::getline(ss, p, '.');) {
    if (p.empty()) return fail("\"", param, "\": an empty part in the path");
    parts.push_back(p);
  }
  if (parts.empty()) return fail("an empty parameter path");
  return set_at(spec, parts, 0, value, param);
}

Result<ScenarioFile> scenario_file_from_json(nlohmann::json spec, const std::string& source, const std::string& dir) {
  ScenarioFile f;
  f.source = source;
  f.dir = dir;
  if (!spec.is_object()) return fail(source, ": a scenario must be a table");
  if (spec.contains("sweep")) {
    if (auto s = read_axes(spec["sweep"], f.axes); !s) return fail(source, ": ", s.error().message());
    spec.erase("sweep");
  }
  if (spec.contains("table")) {
    if (auto s = read_table_spec(spec["table"], f); !s) return fail(source, ": ", s.error().message());
    spec.erase("table");
  }
  f.spec = std::move(spec);
  // Every point must read; checking them all now reports a bad sweep value before anything runs.
  for (const auto& point : sweep_points(f)) {
    nlohmann::json j = f.spec;
    for (const auto& [param, value] : point)
      if (auto s = set_param(j, param, value); !s) return fail(source, ": sweep: ", s.error().message());
    if (auto s = read_scenario(j, source, dir); !s) return s.error();
  }
  return f;
}

Result<ScenarioFile> load_scenario_file(const std::string& path,
                                        const std::vector<std::pair<std::string, std::string>>& overrides) {
  auto j = eval_lua(path);
  if (!j) return j.error();
  std::vector<std::string> notes;
  for (const auto& [param, text] : overrides) {
    if (auto s = set_param(*j, param, parse_value(text)); !s) return fail(path, ": --set ", s.error().message());
    if (auto note = narrow_sweep(*j, param, parse_value(text), text)) notes.push_back(std::move(*note));
  }
  auto dir = std::filesystem::path(path).parent_path().string();
  auto f = scenario_file_from_json(std::move(*j), path, dir.empty() ? "." : dir);
  if (!f) return f;
  if (!f->spec.contains("name")) f->spec["name"] = std::filesystem::path(path).stem().string();
  f->notes = std::move(notes);
  return f;
}

std::vector<std::vector<std::pair<std::string, nlohmann::json>>> sweep_points(const ScenarioFile& f) {
  std::vector<std::vector<std::pair<std::string, nlohmann::json>>> points{{}};
  for (const auto& axis : f.axes) {
    std::vector<std::vector<std::pair<std::string, nlohmann::json>>> next;
    for (const auto& p : points)
      for (const auto& v : axis.values) {
        auto q = p;
        q.emplace_back(axis.param, v);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

}  // namespace sal::sim

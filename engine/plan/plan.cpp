// plan.cpp — see plan.h.
#include "plan/plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "plan/domains.h"

namespace sal::plan {
namespace {

Result<std::vector<uint32_t>> uint_list(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) return fail(where, ": expected an array");
  std::vector<uint32_t> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_unsigned() && !(j[i].is_number_integer() && j[i].get<int64_t>() >= 0))
      return fail(where, "[", i, "]: expected a non-negative integer");
    int64_t v = j[i].get<int64_t>();
    if (v > int64_t(UINT32_MAX)) return fail(where, "[", i, "]: ", v, " is too large");
    out.push_back(uint32_t(v));
  }
  return out;
}

Result<LayerPlan> layer_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return fail(where, ": expected an object with replicas and placement");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "replicas" && it.key() != "placement")
      return fail(where, ".", it.key(), ": unknown key (expected replicas, placement)");
  LayerPlan l;
  if (!j.contains("replicas")) return fail(where, ".replicas: missing");
  auto r = uint_list(j["replicas"], where + ".replicas");
  if (!r) return r.error();
  l.replicas = std::move(*r);
  if (j.contains("placement")) {
    const auto& p = j["placement"];
    if (!p.is_array()) return fail(where, ".placement: expected an array of nodes");
    for (size_t n = 0; n < p.size(); ++n) {
      auto slots = uint_list(p[n], where + ".placement[" + std::to_string(n) + "]");
      if (!slots) return slots.error();
      l.placement.push_back(std::move(*slots));
    }
  }
  return l;
}

Result<std::vector<std::vector<uint32_t>>> uint_lists(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) return fail(where, ": expected an array of lists");
  std::vector<std::vector<uint32_t>> out;
  for (size_t i = 0; i < j.size(); ++i) {
    auto l = uint_list(j[i], where + "[" + std::to_string(i) + "]");
    if (!l) return l.error();
    out.push_back(std::move(*l));
  }
  return out;
}

// An optional non-negative integer field (`def` when absent).
Result<uint32_t> uint_field(const nlohmann::json& j, const char* key, uint32_t def, const std::string& where) {
  if (!j.contains(key)) return def;
  auto v = uint_list(nlohmann::json::array({j[key]}), where + "." + key);
  if (!v) return v.error();
  return (*v)[0];
}

// An optional list of lists of non-negative integers (empty when absent).
Result<std::vector<std::vector<uint32_t>>> lists_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return std::vector<std::vector<uint32_t>>{};
  return uint_lists(j[key], where + "." + key);
}

Result<CheckpointSchedule> schedule_from_json(const nlohmann::json& j) {
  const std::string where = "plan: schedule";
  if (!j.is_object()) return fail(where, ": expected {window, period, slots}");
  CheckpointSchedule s;
  auto window = uint_field(j, "window", 1, where);
  auto period = uint_field(j, "period", 1, where);
  auto slots = lists_field(j, "slots", where);
  if (!window) return window.error();
  if (!period) return period.error();
  if (!slots) return slots.error();
  s.window = *window, s.period = *period, s.slots = std::move(*slots);
  return s;
}

Result<ShardStacks> stacks_from_json(const nlohmann::json& j) {
  const std::string where = "plan: stacks";
  if (!j.is_object()) return fail(where, ": expected {redundancy, hosts, alive, assignment, wipeout}");
  ShardStacks s;
  auto r = uint_field(j, "redundancy", 1, where);
  auto hosts = lists_field(j, "hosts", where);
  auto assignment = lists_field(j, "assignment", where);
  if (!r) return r.error();
  if (!hosts) return hosts.error();
  if (!assignment) return assignment.error();
  s.redundancy = *r, s.hosts = std::move(*hosts), s.assignment = std::move(*assignment);
  const nlohmann::json none = nlohmann::json::array();
  const auto& alive = j.contains("alive") ? j["alive"] : none;
  if (!alive.is_array()) return fail(where, ".alive: expected a list of booleans");
  for (const auto& a : alive) {
    if (!a.is_boolean()) return fail(where, ".alive: expected booleans");
    s.alive.push_back(a.get<bool>());
  }
  if (j.contains("wipeout") && !j["wipeout"].is_boolean()) return fail(where, ".wipeout: expected a boolean");
  s.wipeout = j.contains("wipeout") && j["wipeout"].get<bool>();
  return s;
}

// Optional key `key`: an array of non-negative integer labels (domains, racks).
Status read_labels(const nlohmann::json& j, const char* key, const char* what, std::vector<uint32_t>& out) {
  if (!j.contains(key)) return {};
  const auto& d = j[key];
  if (!d.is_array()) return fail("plan: ", key, " must be ", what);
  for (const auto& n : d) {
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > int64_t(UINT32_MAX))
      return fail("plan: ", key, " must be non-negative integers, got ", n.dump());
    out.push_back(uint32_t(n.get<int64_t>()));
  }
  return {};
}

}  // namespace

Result<Plan> plan_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    return fail("plan: expected {\"layers\": [...]}");
  Plan p;
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    auto l = layer_from_json(j["layers"][i], "layers[" + std::to_string(i) + "]");
    if (!l) return l.error();
    p.layers.push_back(std::move(*l));
  }
  if (p.layers.empty()) return fail("plan: no layers");
  p.experts = uint32_t(p.layers[0].replicas.size());
  p.nodes = uint32_t(p.layers[0].placement.size());
  p.slots = p.layers[0].placement.empty() ? 0 : uint32_t(p.layers[0].placement[0].size());
  auto number = [&](const char* key, uint32_t& out) -> Status {
    if (!j.contains(key)) return {};
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0) return fail("plan: ", key, " must be a non-negative integer");
    out = uint32_t(j[key].get<int64_t>());
    return {};
  };
  SAL_TRY(number("nodes", p.nodes));
  SAL_TRY(number("slots", p.slots));
  SAL_TRY(number("floor", p.floor));
  SAL_TRY(number("experts", p.experts));
  if (j.contains("version")) {
    if (!j["version"].is_number_unsigned()) return fail("plan: version must be a non-negative integer");
    p.version = j["version"].get<uint64_t>();
  }
  if (j.contains("schedule")) {
    auto s = schedule_from_json(j["schedule"]);
    if (!s) return s.error();
    p.schedule = std::move(*s);
  }
  if (j.contains("stacks")) {
    auto s = stacks_from_json(j["stacks"]);
    if (!s) return s.error();
    p.stacks = std::move(*s);
  }
  if (j.contains("groups")) {
    const auto& g = j["groups"];
    if (!g.is_array()) return fail("plan: groups must be an array of position counts");
    for (const auto& n : g) {
      if (!n.is_number_unsigned()) return fail("plan: groups must be non-negative integers, got ", n.dump());
      p.groups.push_back(uint32_t(n.get<uint64_t>()));
    }
  }
  SAL_TRY(read_labels(j, "domains", "an array of failure-domain labels, one per position", p.domains));
  SAL_TRY(read_labels(j, "racks", "an array of rack labels, one per failure domain", p.racks));
  SAL_TRY(check_domains(p));
  return p;
}

nlohmann::ordered_json plan_to_json(const Plan& p) {
  nlohmann::ordered_json j;
  if (p.version) j["version"] = p.version;
  j["nodes"] = p.nodes;
  j["slots"] = p.slots;
  j["floor"] = p.floor;
  j["layers"] = nlohmann::ordered_json::array();
  for (const auto& l : p.layers) {
    nlohmann::ordered_json lj;
    lj["replicas"] = l.replicas;
    lj["placement"] = l.placement;
    j["layers"].push_back(std::move(lj));
  }
  j["experts"] = p.experts;
  if (!p.schedule.slots.empty())
    j["schedule"] = {{"window", p.schedule.window}, {"period", p.schedule.period}, {"slots", p.schedule.slots}};
  if (!p.stacks.hosts.empty())
    j["stacks"] = {{"redundancy", p.stacks.redundancy}, {"hosts", p.stacks.hosts}, {"alive", p.stacks.alive},
                   {"assignment", p.stacks.assignment}, {"wipeout", p.stacks.wipeout}};
  if (!p.groups.empty()) j["groups"] = p.groups;
  if (!p.domains.empty()) j["domains"] = p.domains;
  if (!p.racks.empty()) j["racks"] = p.racks;
  return j;
}

uint32_t group_count(const Plan& p) { return p.groups.empty() ? 1 : uint32_t(p.groups.size()); }

GroupSpan group_span(const Plan& p, uint32_t g) {
  if (p.groups.empty()) return {0, 0, p.nodes};
  GroupSpan s{g, 0, 0};
  for (uint32_t i = 0; i < g && i < p.groups.size(); ++i) s.first += p.groups[i];
  s.count = g < p.groups.size() ? p.groups[g] : 0;
  return s;
}

GroupSpan group_of(const Plan& p, uint32_t pos) {
  if (p.groups.empty()) return {0, 0, p.nodes};
  uint32_t first = 0;
  for (uint32_t g = 0; g < p.groups.size(); ++g) {
    if (pos < first + p.groups[g]) return {g, first, p.groups[g]};
    first += p.groups[g];
  }
  return {uint32_t(p.groups.size()), first, 0};  // past every group
}

Status check_groups(const Plan& p) {
  if (p.groups.empty()) return {};
  uint64_t total = 0;
  for (uint32_t n : p.groups) total += n;
  if (total != p.nodes) return fail("plan: the groups have ", total, " positions, the plan ", p.nodes);
  for (uint32_t g = 0; g < p.groups.size(); ++g) {
    GroupSpan s = group_span(p, g);
    if (s.count == 0) continue;
    for (size_t l = 0; l < p.layers.size(); ++l) {
      std::vector<bool> held(p.experts, false);
      for (uint32_t pos = s.first; pos < s.first + s.count && pos < p.layers[l].placement.size(); ++pos)
        for (ExpertId e : p.layers[l].placement[pos])
          if (e < p.experts) held[e] = true;
      for (uint32_t e = 0; e < p.experts; ++e)
        if (!held[e])
          return fail("plan: group ", g, " (positions ", s.first, "..", s.first + s.count - 1, ") holds no replica of layer ",
                      l, " expert ", e, ": a group must hold the whole model");
    }
  }
  return {};
}

std::optional<std::pair<uint32_t, uint32_t>> missing_expert(const std::vector<std::vector<std::vector<uint32_t>>>& counts,
                                                            const std::vector<uint32_t>& positions) {
  for (size_t l = 0; l < counts.size(); ++l)
    for (size_t e = 0; e < counts[l].size(); ++e) {
      const auto& at = counts[l][e];
      if (std::none_of(positions.begin(), positions.end(), [&](uint32_t p) { return p < at.size() && at[p] > 0; }))
        return std::pair{uint32_t(l), uint32_t(e)};
    }
  return std::nullopt;
}

bool same_placement(const Plan& a, const Plan& b) {
  if (a.nodes != b.nodes || a.slots != b.slots || a.layers.size() != b.layers.size()) return false;
  for (size_t l = 0; l < a.layers.size(); ++l)
    if (a.layers[l].placement != b.layers[l].placement) return false;
  return true;
}

std::vector<std::vector<uint32_t>> replica_counts(const LayerPlan& layer, uint32_t experts) {
  std::vector<std::vector<uint32_t>> counts(experts, std::vector<uint32_t>(layer.placement.size(), 0));
  for (size_t n = 0; n < layer.placement.size(); ++n)
    for (ExpertId e : layer.placement[n])
      if (e < experts) ++counts[e][n];
  return counts;
}

std::vector<std::pair<int, int>> held_by(const Plan& p, uint32_t pos) {
  std::vector<std::pair<int, int>> held;
  for (size_t l = 0; l < p.layers.size(); ++l)
    if (pos < p.layers[l].placement.size())
      for (ExpertId e : p.layers[l].placement[pos]) held.emplace_back(int(l), int(e));
  return held;
}

Status check_shape(const Plan& p, size_t layers) {
  if (p.layers.size() != layers) return fail("plan ", p.version, " has ", p.layers.size(), " layers, the model ", layers);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const auto& placement = p.layers[l].placement;
    if (placement.size() != p.nodes)
      return fail("plan ", p.version, ": layer ", l, " places ", placement.size(), " positions of ", p.nodes);
    for (size_t n = 0; n < placement.size(); ++n) {
      if (placement[n].size() != p.slots)
        return fail("plan ", p.version, ": layer ", l, " position ", n, " has ", placement[n].size(), " slots of ", p.slots);
      for (ExpertId e : placement[n])
        if (e >= p.experts) return fail("plan ", p.version, ": layer ", l, " position ", n, " holds expert ", e, " of ", p.experts);
    }
  }
  return {};
}

std::vector<std::vector<uint32_t>> expert_nodes(const LayerPlan& layer, uint32_t experts) {
  std::vector<std::vector<uint32_t>> out(experts);
  for (uint32_t n = 0; n < layer.placement.size(); ++n)
    for (ExpertId e : layer.placement[n])
      if (e < experts && (out[e].empty() || out[e].back() != n)) out[e].push_back(n);
  return out;
}

}  // namespace sal::plan

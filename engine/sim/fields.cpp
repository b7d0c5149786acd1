// fields.cpp — see fields.h.
#include "sim/fields.h"

#include <cmath>

#include "core/json_text.h"

namespace sal::sim {
namespace {

const nlohmann::json& null_json() {
  static const nlohmann::json kNull;
  return kNull;
}

std::string shown(const nlohmann::json& v) {
  std::string s = json_text(v);
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

}  // namespace

Fields::Fields(const nlohmann::json& j, std::string path) : j_(j.is_object() ? j : null_json()), path_(std::move(path)) {}

std::string Fields::path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

bool Fields::has(const std::string& key) const { return j_.is_object() && j_.contains(key) && !j_[key].is_null(); }

const nlohmann::json* Fields::raw(const std::string& key) {
  read_.insert(key);
  if (!has(key)) return nullptr;
  return &j_[key];
}

Status Fields::number(const std::string& key, double& out, double lo, double hi) {
  const auto* v = raw(key);
  if (!v) return {};
  if (!v->is_number()) return fail(path(key), ": must be a number, got ", shown(*v));
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) return fail(path(key), ": must be in ", lo, "..", hi, ", got ", d);
  out = d;
  return {};
}

Status Fields::integer(const std::string& key, int64_t& out, int64_t lo, int64_t hi) {
  const auto* v = raw(key);
  if (!v) return {};
  if (!v->is_number() || std::floor(v->get<double>()) != v->get<double>())
    return fail(path(key), ": must be an integer, got ", shown(*v));
  double d = v->get<double>();
  if (d < double(lo) || d > double(hi)) return fail(path(key), ": must be in ", lo, "..", hi, ", got ", d);
  out = int64_t(d);
  return {};
}

Status Fields::count(const std::string& key, uint32_t& out, uint32_t lo, uint32_t hi) {
  int64_t v = out;
  if (auto s = integer(key, v, lo, hi); !s) return s;
  out = uint32_t(v);
  return {};
}

Status Fields::boolean(const std::string& key, bool& out) {
  const auto* v = raw(key);
  if (!v) return {};
  if (!v->is_boolean()) return fail(path(key), ": must be true or false, got ", shown(*v));
  out = v->get<bool>();
  return {};
}

Status Fields::text(const std::string& key, std::string& out, const std::vector<std::string>& choices) {
  const auto* v = raw(key);
  if (!v) return {};
  if (!v->is_string()) return fail(path(key), ": must be a string, got ", shown(*v));
  auto s = v->get<std::string>();
  if (!choices.empty()) {
    bool ok = false;
    std::string list;
    for (const auto& c : choices) {
      ok = ok || c == s;
      list += (list.empty() ? "" : ", ") + c;
    }
    if (!ok) return fail(path(key), ": must be one of ", list, ", got \"", s, "\"");
  }
  out = s;
  return {};
}

Status Fields::finish() const {
  if (!j_.is_object()) return {};
  for (const auto& [key, value] : j_.items()) {
    if (read_.count(key)) continue;
    std::string known;
    for (const auto& k : read_) known += (known.empty() ? "" : ", ") + k;
    return fail(path(key), ": unknown field (known here: ", known, ")");
  }
  return {};
}

}  // namespace sal::sim

// fuzz_files.cpp — the files operators write: job files, drill scripts, spot traces, plan files,
// load files, scenarios, key files and allowlists. Each parser must answer with a value or an
// error naming the file — never crash, hang past its budget, or throw.
#include <nlohmann/json.hpp>

#include "drill/drill_spec.h"
#include "fuzz/targets.h"
#include "job/config.h"
#include "mesh/security.h"
#include "plan/plan.h"
#include "core/load_files.h"
#include "sim/scenario.h"
#include "sim/trace.h"
#include "wire/curve.h"

namespace sal::fuzz {

int job(const uint8_t* data, size_t size) {
  (void)job::load_text(text_of(data, size), "fuzz-job.lua", "/nonexistent");
  return 0;
}

int drill(const uint8_t* data, size_t size) {
  (void)drill::parse_drill(text_of(data, size), "/nonexistent/fuzz-drill.lua", {{"n", "2"}});
  return 0;
}

int trace(const uint8_t* data, size_t size) {
  (void)sim::parse_bamboo_trace(text_of(data, size), "fuzz-trace.csv");
  (void)sim::parse_count_trace(text_of(data, size), "fuzz-trace.txt");
  (void)sim::parse_series_trace(text_of(data, size), "fuzz-trace.csv", 3600.0);
  (void)sim::parse_trace(text_of(data, size), "fuzz-trace.csv", {});
  return 0;
}

int plan(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(text_of(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  auto p = plan::plan_from_json(j);
  if (p) {  // what was read must read back the same
    auto again = plan::plan_from_json(nlohmann::json::parse(plan::plan_to_json(*p).dump()));
    if (!again || plan::plan_to_json(*again) != plan::plan_to_json(*p)) __builtin_trap();
  }
  return 0;
}

int loads(const uint8_t* data, size_t size) {
  (void)parse_loads(text_of(data, size), "fuzz-loads.csv");
  return 0;
}

int scenario(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(text_of(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  auto f = sim::scenario_file_from_json(std::move(j), "fuzz-scenario", "/nonexistent");
  if (!f) return 0;
  size_t points = 0;
  for (const auto& point : sim::sweep_points(*f)) {
    if (++points > 16) break;
    nlohmann::json spec = f->spec;
    bool ok = true;
    for (const auto& [param, value] : point) ok = ok && sim::set_param(spec, param, value).ok();
    if (ok) (void)sim::read_scenario(spec, "fuzz-scenario", "/nonexistent");
  }
  return 0;
}

int keys(const uint8_t* data, size_t size) {
  std::string text = text_of(data, size);
  (void)wire::parse_key_file(text, "fuzz.key");
  if (auto a = mesh::Allowlist::parse(text, "fuzz-allow"))
    for (const char* domain : {mesh::kMeshDomain, mesh::kReplDomain, mesh::kStoreDomain, "other"})
      (void)mesh::zap_verdict(*a, domain, "CURVE", text.substr(0, 32));
  return 0;
}

}  // namespace sal::fuzz

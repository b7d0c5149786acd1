// run_files.cpp — see run_files.h.
#include "support/run_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "core/paths.h"
#include "ckpt/format.h"
#include "report/csv.h"
#include "support/mesh_harness.h"
#include "support/proc.h"

namespace sal::test {

std::string tiny_job(const std::string& dir, const std::string& name) {
  MeshOptions shape;
  std::string path = dir + "/" + name + ".lua";
  std::ofstream(path) << "return {\n  name = '" << name << "',\n  " << shape.model << "\n  " << shape.data
                      << "\n  train = { batch = 8 },\n}\n";
  return path;
}

nlohmann::json run_json(const std::vector<std::string>& args, const std::string& log, int timeout_ms, int rc) {
  Proc run = spawn(args, log);
  int got = run.wait(timeout_ms);
  std::string out = run.output();
  INFO(out);
  REQUIRE(got == rc);
  auto at = out.rfind("{\"job\"");
  REQUIRE(at != std::string::npos);
  return nlohmann::json::parse(out.substr(at, out.find('\n', at) - at));
}

std::vector<double> metrics_column(const std::string& run_dir, const std::string& column) {
  auto csv = report::CsvFile::read(run_dir + "/metrics.csv", {column});
  if (!csv) throw std::runtime_error(csv.error().message());
  std::vector<double> out;
  for (const auto& rec : csv->records()) {
    auto v = csv->number(rec, column);
    if (!v) throw std::runtime_error(v.error().message());
    out.push_back(*v);
  }
  return out;
}

std::map<uint64_t, double> validation_losses(const std::string& run_dir) {
  auto rows = report::read_metrics(run_dir + "/metrics.csv");
  if (!rows) throw std::runtime_error(rows.error().message());
  std::map<uint64_t, double> out;
  for (const auto& r : *rows)
    if (!std::isnan(r.val_loss)) out[r.step] = r.val_loss;
  return out;
}

std::vector<report::EventRow> events(const std::string& run_dir) {
  auto rows = report::read_events(run_dir + "/events.csv", std::nullopt);
  if (!rows) throw std::runtime_error(rows.error().message());
  return *rows;
}

std::string file_text(const std::string& path) {
  auto text = read_file(path, size_t(1) << 30);
  if (!text) throw std::runtime_error(text.error().message());
  return *text;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string run_logs(const std::string& run_dir) {
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator(run_dir))
    if (e.path().extension() == ".log") all += file_text(e.path().string());
  return all;
}

UnitDistance unit_distance(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) throw std::runtime_error("unit sizes differ");
  constexpr double kFar = std::numeric_limits<double>::infinity();
  UnitDistance d;
  double dist = 0, size = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (!std::isfinite(a[k]) || !std::isfinite(b[k])) return UnitDistance{kFar, kFar};  // NaN == NaN is no match
    const double x = double(a[k]) - double(b[k]);
    dist += x * x;
    size += double(a[k]) * double(a[k]);
    d.elementwise = std::max(d.elementwise, std::abs(x));
  }
  d.relative = std::sqrt(dist / std::max(size, 1e-30));
  return d;
}

WeightDistance weight_distance(const std::string& checkpoint_a, const std::string& checkpoint_b) {
  auto pa = ckpt::load_all(checkpoint_a), pb = ckpt::load_all(checkpoint_b);
  if (!pa || !pb) throw std::runtime_error("cannot load " + checkpoint_a + " or " + checkpoint_b);
  auto ua = pa->units(), ub = pb->units();
  if (ua.size() != ub.size()) throw std::runtime_error("the checkpoints hold different units");
  WeightDistance d;
  d.units = ua.size();
  std::vector<double> each;
  for (size_t i = 0; i < ua.size(); ++i) {
    const UnitDistance u = unit_distance(ua[i]->w, ub[i]->w);
    each.push_back(u.relative);
    d.relative = std::max(d.relative, u.relative);  // std::max keeps infinity: no NaN can reach here
    d.elementwise = std::max(d.elementwise, u.elementwise);
  }
  std::sort(each.begin(), each.end());
  d.median_relative = each.empty() ? 0 : each[each.size() / 2];
  return d;
}

}  // namespace sal::test

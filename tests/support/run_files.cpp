// run_files.cpp — see run_files.h.
#include "support/run_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "model/checkpoint.h"
#include "support/proc.h"

namespace sal::test {
namespace {

// Splits one CSV line (fields may be quoted, with "" inside).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

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
  std::ifstream in(run_dir + "/metrics.csv");
  std::string line;
  std::getline(in, line);
  auto header = csv_fields(line);
  auto it = std::find(header.begin(), header.end(), column);
  if (it == header.end()) throw std::runtime_error("metrics.csv has no column " + column);
  size_t at = size_t(it - header.begin());
  std::vector<double> out;
  while (std::getline(in, line)) out.push_back(std::stod(csv_fields(line).at(at)));
  return out;
}

std::vector<EventRow> events(const std::string& run_dir) {
  std::ifstream in(run_dir + "/events.csv");
  std::string line;
  std::getline(in, line);  // seq,mono_ns,wall_ms,kind,node,epoch,detail
  std::vector<EventRow> out;
  while (std::getline(in, line)) {
    auto f = csv_fields(line);
    if (f.size() >= 7) out.push_back({f[3], f[4], f[6]});
  }
  return out;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string run_logs(const std::string& run_dir) {
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator(run_dir))
    if (e.path().extension() == ".log") all += file_text(e.path().string());
  return all;
}

WeightDistance weight_distance(const std::string& checkpoint_a, const std::string& checkpoint_b) {
  auto pa = model::load_all(checkpoint_a), pb = model::load_all(checkpoint_b);
  if (!pa || !pb) throw std::runtime_error("cannot load " + checkpoint_a + " or " + checkpoint_b);
  auto ua = pa->units(), ub = pb->units();
  if (ua.size() != ub.size()) throw std::runtime_error("the checkpoints hold different units");
  WeightDistance d;
  d.units = ua.size();
  std::vector<double> each;
  for (size_t i = 0; i < ua.size(); ++i) {
    if (ua[i]->w.size() != ub[i]->w.size()) throw std::runtime_error("unit sizes differ");
    double dist = 0, size = 0;
    for (size_t k = 0; k < ua[i]->w.size(); ++k) {
      double x = double(ua[i]->w[k]) - double(ub[i]->w[k]);
      dist += x * x;
      size += double(ua[i]->w[k]) * double(ua[i]->w[k]);
      d.elementwise = std::max(d.elementwise, std::abs(x));
    }
    each.push_back(std::sqrt(dist / std::max(size, 1e-30)));
    d.relative = std::max(d.relative, each.back());
  }
  std::sort(each.begin(), each.end());
  d.median_relative = each.empty() ? 0 : each[each.size() / 2];
  return d;
}

}  // namespace sal::test

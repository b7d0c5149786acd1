// load_files.cpp — see load_files.h.
#include "core/load_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/strings.h"

namespace sal {
namespace {

Result<std::vector<double>> csv_line(const std::string& line, int line_no, const std::string& path) {
  std::vector<double> row;
  for (auto& cell : split(line, ',')) {
    auto v = parse_double(cell);
    if (!v || *v < 0) return fail(path, ":", line_no, ": '", std::string(trim(cell)), "' is not a token count");
    row.push_back(*v);
  }
  return row;
}

// "<layer>:[[...], [...]]" -> per-expert sums over the micro-batches.
Result<std::vector<double>> trace_line(const std::string& line, int line_no, const std::string& path) {
  auto colon = line.find(':');
  auto j = nlohmann::json::parse(line.substr(colon + 1), nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.empty() || !j[0].is_array())
    return fail(path, ":", line_no, ": expected <layer>:[[counts], ...]");
  std::vector<double> sum(j[0].size(), 0.0);
  for (const auto& mb : j) {
    if (!mb.is_array() || mb.size() != sum.size()) return fail(path, ":", line_no, ": micro-batches differ in length");
    for (size_t e = 0; e < sum.size(); ++e) {
      if (!mb[e].is_number() || mb[e].get<double>() < 0) return fail(path, ":", line_no, ": bad count at expert ", e);
      sum[e] += mb[e].get<double>();
    }
  }
  return sum;
}

// The number in a file name ("table_iter1051_rank0.log" -> 1051; -1 without one).
int64_t number_in(const std::string& name) {
  auto i = name.find_first_of("0123456789");
  return i == std::string::npos ? -1 : std::atoll(name.c_str() + i);
}

}  // namespace

Result<std::vector<std::string>> load_trace_files(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(path, ec))
    if (e.is_regular_file()) files.push_back(e.path().string());
  if (ec) return fail(path, ": ", ec.message());
  auto number = [](const std::string& f) { return number_in(std::filesystem::path(f).filename().string()); };
  std::sort(files.begin(), files.end(), [&](const std::string& a, const std::string& b) {
    auto na = number(a), nb = number(b);
    return na != nb ? na < nb : a < b;
  });
  if (files.empty()) return fail(path, ": no load files in the directory");
  return files;
}

std::string trace_line_of(size_t layer, const std::vector<uint64_t>& counts) {
  std::string s = std::to_string(layer) + ":[[";
  for (size_t e = 0; e < counts.size(); ++e) s += (e ? ", " : "") + std::to_string(counts[e]);
  return s + "]]";
}

Result<std::vector<std::vector<double>>> read_load_file(const std::string& path) {
  auto text = read_file(path, 64u << 20);
  if (!text) return text.error();
  return parse_loads(*text, path);
}

Result<std::vector<std::vector<double>>> parse_loads(const std::string& text, const std::string& path) {
  std::vector<std::vector<double>> layers;
  for (auto& [line_no, line] : content_lines(text)) {
    bool trace = line.find(":[") != std::string::npos;
    auto row = trace ? trace_line(line, line_no, path) : csv_line(line, line_no, path);
    if (!row) return row.error();
    if (!layers.empty() && row->size() != layers[0].size())
      return fail(path, ":", line_no, ": ", row->size(), " experts, but the first layer has ", layers[0].size());
    layers.push_back(std::move(*row));
  }
  if (layers.empty()) return fail(path, ": no loads");
  return layers;
}

}  // namespace sal

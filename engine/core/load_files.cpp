// load_files.cpp — see load_files.h.
#include "core/load_files.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/strings.h"

namespace sal {
namespace {

// The first number in a name ("layer10" -> 10; -1 without one).
int64_t number_in(const std::string& name) {
  auto i = name.find_first_of("0123456789");
  return i == std::string::npos ? -1 : std::atoll(name.c_str() + i);
}

// A CSV line's cells, as spreadsheets and scripts write them: separated by commas, else by ';',
// else by tabs or spaces; double quotes dropped; the empty cell of a trailing separator dropped.
std::vector<std::string> cells_of(std::string line) {
  line.erase(std::remove(line.begin(), line.end(), '"'), line.end());
  std::vector<std::string> cells;
  if (line.find(',') != std::string::npos || line.find(';') != std::string::npos) {
    for (auto& c : split(line, line.find(',') != std::string::npos ? ',' : ';')) cells.emplace_back(trim(c));
    if (cells.size() > 1 && cells.back().empty()) cells.pop_back();
  } else {
    cells = words(line);
  }
  return cells;
}

// A line of column names ("expert0,expert1,..."): no cell a number; or pandas' header of numbered
// columns after its unnamed index (",0,1,2").
bool header_cells(const std::vector<std::string>& cells) {
  if (cells.size() > 1 && cells[0].empty()) return true;
  return std::none_of(cells.begin(), cells.end(), [](const std::string& c) { return parse_double(c).ok(); });
}

// A header's first column names the layers, not an expert: empty (pandas' index), "layer",
// "layers", "layer_id", "layer_idx", "layer_index", "index", "idx" or "id" (not "layer0.expert0").
bool label_column(const std::vector<std::string>& header) {
  if (header.empty()) return false;
  const std::string name = to_lower(header[0]);
  for (const char* label : {"", "layer", "layers", "layer_id", "layer_idx", "layer_index", "index", "idx", "id"})
    if (name == label) return true;
  return false;
}

// A row's first cell is its label ("layer0", "moe.3"): it begins with a letter and is not a
// number, and every other cell is one.
bool labelled_row(const std::vector<std::string>& cells) {
  if (cells.size() < 2 || cells[0].empty() || !std::isalpha(static_cast<unsigned char>(cells[0][0])) ||
      parse_double(cells[0]).ok())
    return false;
  return std::all_of(cells.begin() + 1, cells.end(), [](const std::string& c) { return parse_double(c).ok(); });
}

Result<std::vector<double>> csv_line(const std::vector<std::string>& cells, int line_no, const std::string& path) {
  std::vector<double> row;
  for (const auto& cell : cells) {
    auto v = parse_double(cell);
    if (!v || !(*v >= 0) || !std::isfinite(*v)) return fail(path, ":", line_no, ": '", cell, "' is not a token count");
    row.push_back(*v);
  }
  return row;
}

// A SmartMoE line's start: its layer label (digits before the ':', spaces allowed) and where its
// counts begin (at a '['); nullopt for a line of another format.
struct TraceStart {
  std::string_view label;
  size_t at = 0;
};
std::optional<TraceStart> trace_start(const std::string& line) {
  const auto colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  const auto layer = trim(std::string_view(line).substr(0, colon));
  if (layer.empty() || !std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const auto at = line.find_first_not_of(" \t", colon + 1);
  if (at == std::string::npos || line[at] != '[') return std::nullopt;
  return TraceStart{layer, at};
}

// "<layer>:[[...], [...]]" -> per-expert sums over the micro-batches ("<layer>:[...]": one).
Result<std::vector<double>> trace_line(const std::string& line, size_t at, int line_no, const std::string& path) {
  auto j = nlohmann::json::parse(line.substr(at), nullptr, false);
  if (!j.is_discarded() && j.is_array() && !j.empty() && j[0].is_number()) j = nlohmann::json::array({j});
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

// A SmartMoE line's layer label as a number ("12" -> 12).
Result<uint64_t> trace_label(std::string_view label, int line_no, const std::string& path) {
  if (label.size() > 9) return fail(path, ":", line_no, ": layer label '", label, "' is not a layer number");
  return uint64_t(std::strtoull(std::string(label).c_str(), nullptr, 10));
}

// SmartMoE lines in the order of their layer labels, which a writer need not keep (one logger a
// layer): each label once, the labels consecutive from the lowest (0; 1 where the writer counts
// from 1; a pipeline stage's first layer in a file of its layers). `labels` pairs each row's label
// with its line.
Result<std::vector<std::vector<double>>> by_label(std::vector<std::vector<double>> rows,
                                                 const std::vector<std::pair<uint64_t, int>>& labels,
                                                 const std::string& path) {
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return labels[a].first < labels[b].first; });
  const uint64_t base = labels[order[0]].first;
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [label, line] = labels[order[i]];
    if (i > 0 && label == labels[order[i - 1]].first)
      return fail(path, ":", line, ": layer ", label, " again (line ", labels[order[i - 1]].second, " has it)");
    if (label != base + i) return fail(path, ": no line for layer ", base + i, " (line ", line, " is layer ", label, ")");
    out.push_back(std::move(rows[order[i]]));
  }
  return out;
}

// A JSON file's layers checked as the lines are: counts >= 0, every layer as long as the first.
Result<std::vector<std::vector<double>>> checked_layers(std::vector<std::vector<double>> layers, const std::string& path) {
  if (layers.empty() || layers[0].empty()) return fail(path, ": no loads");
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].size() != layers[0].size())
      return fail(path, ": layer ", l, " has ", layers[l].size(), " experts, but the first layer has ", layers[0].size());
    for (size_t e = 0; e < layers[l].size(); ++e)
      if (!(layers[l][e] >= 0) || !std::isfinite(layers[l][e])) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", layers[l][e]);
        return fail(path, ": layer ", l, ", expert ", e, ": ", value, " is not a token count");
      }
  }
  return layers;
}

// A JSON layer, [counts]; nullopt when it is not an array of numbers.
std::optional<std::vector<double>> json_layer(const nlohmann::json& layer) {
  if (!layer.is_array()) return std::nullopt;
  std::vector<double> out;
  for (const auto& v : layer) {
    if (!v.is_number()) return std::nullopt;
    out.push_back(v.get<double>());
  }
  return out;
}

// A whole file that is one JSON array of layers, [[counts of layer 0], ...], or an object of them,
// {"layer0": [counts], "layer1": ...}, ordered by the number in their names (then by name), or an
// object whose one member is such an array ({"layers": [[...], ...]}); nullopt when the file is
// not JSON, an error when it is JSON of another shape.
Result<std::optional<std::vector<std::vector<double>>>> json_layers(std::string_view text, const std::string& path) {
  using None = std::optional<std::vector<std::vector<double>>>;
  const auto body = trim(text);
  const auto second = body.find_first_not_of(" \t\r\n", 1);
  if (body.empty() || second == std::string_view::npos) return None{};
  if (!(body[0] == '[' && body[second] == '[') && body[0] != '{') return None{};
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return None{};
  if (j.is_object() && j.size() == 1 && j.begin()->is_array() && !j.begin()->empty() && j.begin()->front().is_array())
    j = nlohmann::json(*j.begin());  // {"layers": [[...], ...]}
  const auto shape = [&] {
    return fail(path, ": JSON, but not loads: expected an array of layers ([[counts of layer 0], ...]), an object of ",
                "them ({\"layer0\": [counts], ...}) or an object of one such array ({\"layers\": [[...], ...]})");
  };
  if (!(j.is_array() || j.is_object()) || j.empty()) return shape();
  std::vector<std::pair<std::string, const nlohmann::json*>> named;
  for (auto it = j.begin(); it != j.end(); ++it) named.emplace_back(j.is_object() ? it.key() : "", &*it);
  std::stable_sort(named.begin(), named.end(), [](const auto& a, const auto& b) {
    const auto na = number_in(a.first), nb = number_in(b.first);
    return na != nb ? na < nb : a.first < b.first;
  });
  std::vector<std::vector<double>> out;
  for (const auto& [name, layer] : named) {
    auto counts = json_layer(*layer);
    if (!counts) return shape();
    out.push_back(std::move(*counts));
  }
  return None{std::move(out)};
}

}  // namespace

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
  const std::string_view body = without_bom(text);
  auto whole = json_layers(body, path);
  if (!whole) return whole.error();
  if (*whole) return checked_layers(std::move(**whole), path);
  std::vector<std::vector<double>> layers;
  std::vector<std::pair<uint64_t, int>> trace_labels;  // each SmartMoE line's layer label and line
  bool first = true, labels = false;
  for (auto& [line_no, line] : content_lines(body)) {
    const std::optional<TraceStart> start = trace_start(line);
    const bool trace = start.has_value();
    if (!layers.empty() && trace != !trace_labels.empty())
      return fail(path, ":", line_no, ": a ", trace ? "SmartMoE line (<layer>:[[counts], ...])" : "CSV row",
                  " after ", trace ? "CSV rows" : "SmartMoE lines", ": one file is one format");
    auto cells = trace ? std::vector<std::string>{} : cells_of(line);
    if (std::exchange(first, false) && !trace && header_cells(cells)) {  // column names
      labels = label_column(cells);
      continue;
    }
    if (!trace && cells.size() > 1 && (labels || labelled_row(cells)))
      cells.erase(cells.begin());  // the layer's label, not an expert's count
    auto row = trace ? trace_line(line, start->at, line_no, path) : csv_line(cells, line_no, path);
    if (!row) return row.error();
    if (!layers.empty() && row->size() != layers[0].size())
      return fail(path, ":", line_no, ": ", row->size(), " experts, but the first layer has ", layers[0].size());
    if (trace) {
      auto label = trace_label(start->label, line_no, path);
      if (!label) return label.error();
      trace_labels.emplace_back(*label, line_no);
    }
    layers.push_back(std::move(*row));
  }
  if (layers.empty()) return fail(path, ": no loads");
  if (!trace_labels.empty()) return by_label(std::move(layers), trace_labels, path);
  return layers;
}

}  // namespace sal

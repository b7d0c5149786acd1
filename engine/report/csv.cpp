// csv.cpp — see csv.h.
#include "report/csv.h"

#include <algorithm>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::report {
namespace {

// Reads one field starting at text[i]; leaves i on the separator (',' or '\n') or at the end.
Result<std::string> next_field(std::string_view text, size_t& i, int& line) {
  std::string out;
  if (i < text.size() && text[i] == '"') {
    int opened = line;
    bool closed = false;
    for (++i; i < text.size() && !closed; ++i) {
      if (text[i] != '"') {
        if (text[i] == '\n') ++line;
        out += text[i];
      } else if (i + 1 < text.size() && text[i + 1] == '"') {
        out += '"';
        ++i;
      } else {
        closed = true;
      }
    }
    if (!closed) return fail("line ", opened, ": unterminated quoted field");
  }
  while (i < text.size() && text[i] != ',' && text[i] != '\n') out += text[i++];
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return out;
}

bool blank(const CsvRecord& rec) { return rec.fields.size() == 1 && trim(rec.fields[0]).empty(); }

}  // namespace

Result<std::vector<CsvRecord>> parse_csv(std::string_view text, const std::string& path) {
  std::vector<CsvRecord> out;
  int line = 1;
  size_t i = 0;
  while (i < text.size()) {
    CsvRecord rec{line, {}};
    for (;;) {
      auto field = next_field(text, i, line);
      if (!field) return field.error().with_context(path);
      rec.fields.push_back(std::move(*field));
      if (i >= text.size() || text[i] == '\n') break;
      ++i;  // the comma
    }
    if (i < text.size()) {  // the newline
      ++i;
      ++line;
    }
    if (!blank(rec)) out.push_back(std::move(rec));
  }
  return out;
}

Result<CsvFile> CsvFile::read(const std::string& path, const std::vector<std::string>& required) {
  auto text = read_file(path);
  if (!text) return text.error();
  auto records = parse_csv(*text, path);
  if (!records) return records.error();
  if (records->empty()) return fail(path, ": empty file (expected a header line)");
  CsvFile f;
  f.path_ = path;
  f.header_ = records->front().fields;
  for (auto& h : f.header_) h = std::string(trim(h));
  for (const auto& name : required)
    if (std::find(f.header_.begin(), f.header_.end(), name) == f.header_.end())
      return fail(path, ": line 1: the header has no column '", name, "' (got '", join(f.header_, ","), "')");
  for (size_t r = 1; r < records->size(); ++r)
    if ((*records)[r].fields != records->front().fields) f.records_.push_back(std::move((*records)[r]));
  return f;
}

Error CsvFile::at(const CsvRecord& rec, size_t col, const std::string& what) const {
  return fail(path_, ": line ", rec.line, ", column ", col + 1, " (", header_[col], "): ", what);
}

Result<size_t> CsvFile::column(const CsvRecord& rec, const std::string& name) const {
  size_t col = size_t(std::find(header_.begin(), header_.end(), name) - header_.begin());
  if (col == header_.size()) return fail(path_, ": no column '", name, "'");
  if (rec.fields.size() != header_.size())
    return fail(path_, ": line ", rec.line, ": expected ", header_.size(), " fields, got ", rec.fields.size());
  return col;
}

bool CsvFile::has(const std::string& name) const {
  return std::find(header_.begin(), header_.end(), name) != header_.end();
}

Result<std::string> CsvFile::text(const CsvRecord& rec, const std::string& name) const {
  auto col = column(rec, name);
  if (!col) return col.error();
  return rec.fields[*col];
}

template <class T>
Result<T> CsvFile::parsed(const CsvRecord& rec, const std::string& name, Result<T> (*parse)(std::string_view)) const {
  auto col = column(rec, name);
  if (!col) return col.error();
  auto v = parse(rec.fields[*col]);
  if (!v) return at(rec, *col, v.error().message());
  return *v;
}

Result<double> CsvFile::number(const CsvRecord& rec, const std::string& name) const {
  return parsed<double>(rec, name, parse_double);
}

Result<uint64_t> CsvFile::count(const CsvRecord& rec, const std::string& name) const {
  return parsed<uint64_t>(rec, name, parse_uint);
}

Result<int64_t> CsvFile::integer(const CsvRecord& rec, const std::string& name) const {
  return parsed<int64_t>(rec, name, parse_int);
}

}  // namespace sal::report

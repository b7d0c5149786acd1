// csv.h — reading the CSV files a run leaves behind. Records follow RFC 4180 quoting (a field in
// double quotes may hold commas, newlines and "" for a quote). Columns are found by header name,
// so a file with extra columns still reads; every error names the file, the line and the column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace sal::report {

struct CsvRecord {
  int line = 0;  // 1-based line on which the record starts
  std::vector<std::string> fields;
};

// Splits `text` into records; `path` only names the file in errors (an unterminated quote).
Result<std::vector<CsvRecord>> parse_csv(std::string_view text, const std::string& path);

// A CSV file whose first record is a header holding (at least) the named columns.
class CsvFile {
 public:
  // Reads `path`; fails if it cannot be read, is empty, or lacks one of `required` columns.
  static Result<CsvFile> read(const std::string& path, const std::vector<std::string>& required);

  const std::string& path() const { return path_; }
  // The data records (the header excluded; a repeated header line, as an appended file may hold, is skipped).
  const std::vector<CsvRecord>& records() const { return records_; }

  // A field of `rec` by column name (which must be one of `required`), parsed or with an error
  // like "run/metrics.csv: line 7, column 2 (loss): expected a number, got 'x'".
  Result<std::string> text(const CsvRecord& rec, const std::string& column) const;
  Result<double> number(const CsvRecord& rec, const std::string& column) const;
  Result<uint64_t> count(const CsvRecord& rec, const std::string& column) const;
  Result<int64_t> integer(const CsvRecord& rec, const std::string& column) const;
  // Whether the header has `column` (one a later version added: older files lack it).
  bool has(const std::string& column) const;

 private:
  Error at(const CsvRecord& rec, size_t col, const std::string& what) const;
  Result<size_t> column(const CsvRecord& rec, const std::string& name) const;
  template <class T>
  Result<T> parsed(const CsvRecord& rec, const std::string& name, Result<T> (*parse)(std::string_view)) const;

  std::string path_;
  std::vector<std::string> header_;
  std::vector<CsvRecord> records_;
};

}  // namespace sal::report

// prom_scrape.h — scraping a Prometheus endpoint as Prometheus would, for tests: an HTTP GET over a
// plain socket, and a reader of the text exposition format that holds the text to its rules —
// `# HELP name text` and `# TYPE name kind` lines, samples `name{label="value",...} value
// [timestamp]`, valid metric and label names, quoted and escaped label values, numeric values,
// and every sample belonging to a family declared by a TYPE line before it (a histogram's
// `_bucket`, `_sum` and `_count` belong to it).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::test {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromText {
  std::map<std::string, std::string> help;  // family -> its HELP text
  std::map<std::string, std::string> type;  // family -> counter, gauge, histogram, summary or untyped
  std::vector<PromSample> samples;
  // The value of the first sample named `name` whose labels include `labels`; none if there is none.
  std::optional<double> value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
};

// Reads exposition text; the error names the line and the rule it breaks.
Result<PromText> parse_prom_text(const std::string& text);

// GET `url` (http://HOST:PORT/PATH, or https:// with the server's certificate checked against
// `ca_file`) over a TCP socket with `timeout_ms` for each of connect, send and receive, with an
// Authorization header when `authorization` is given ("Bearer …"); the body of a 200 answer, else
// an error with the status line or the socket's error.
Result<std::string> http_get(const std::string& url, int timeout_ms = 5000, const std::string& authorization = "",
                             const std::string& ca_file = "");

// http_get + parse_prom_text.
Result<PromText> scrape(const std::string& url, int timeout_ms = 5000, const std::string& authorization = "",
                        const std::string& ca_file = "");

}  // namespace sal::test

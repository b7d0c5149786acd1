// strings.h — small text helpers used across the engine: JSON string quoting, trimming/splitting,
// strict number parsing with errors that say what was wrong, and "did you mean" suggestions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace sal {

// "a\"b" -> "\"a\\\"b\"" (RFC 8259 escaping; control bytes as \u00XX; invalid UTF-8 passes through).
std::string json_quote(std::string_view s);
// A CSV field: quoted (with "" for ") when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& s);

std::string_view trim(std::string_view s);
// ASCII letters in lower case ("Remove" -> "remove"); other bytes as they are.
std::string to_lower(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// The lines of a small config file that carry content: (1-based line number, trimmed text),
// skipping blank lines and lines starting with '#'.
std::vector<std::pair<int, std::string>> content_lines(std::string_view text);
// `text` without a leading UTF-8 byte order mark (spreadsheets write one).
std::string_view without_bom(std::string_view text);

// Whitespace-separated words of a line.
std::vector<std::string> words(std::string_view line);

// Whole-string integer parse: "12" ok, "12x", "", "-1" (for unsigned) rejected with a reason.
Result<int64_t> parse_int(std::string_view s);
Result<uint64_t> parse_uint(std::string_view s);
Result<double> parse_double(std::string_view s);
// A number as people write it in a message: 40, 2.5, 1e+12 (printf's %g).
std::string short_number(double v);

// Levenshtein distance, and the closest candidate within a small distance (empty if none).
size_t edit_distance(std::string_view a, std::string_view b);
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// Truncates to at most n bytes, adding "…" when cut (for log lines that echo input).
std::string clip(std::string_view s, size_t n);
// Input echoed in an error: at most n bytes ("… (N bytes)" when cut), a control byte (a NUL would
// end a C string's message) as \xNN.
std::string shown_input(std::string_view s, size_t n = 60);

}  // namespace sal

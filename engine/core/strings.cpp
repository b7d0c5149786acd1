// strings.cpp — see strings.h.
#include "core/strings.h"

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace sal {

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::vector<std::pair<int, std::string>> content_lines(std::string_view text) {
  std::vector<std::pair<int, std::string>> out;
  int n = 0;
  for (auto& raw : split(text, '\n')) {
    ++n;
    std::string line(trim(raw));
    if (!line.empty() && line[0] != '#') out.emplace_back(n, std::move(line));
  }
  return out;
}

std::string_view without_bom(std::string_view text) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  return text.substr(0, kBom.size()) == kBom ? text.substr(kBom.size()) : text;
}

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.emplace_back(line.substr(start, i - start));
  }
  return out;
}

Result<int64_t> parse_int(std::string_view s) {
  std::string str(trim(s));
  if (str.empty()) return fail("expected an integer, got an empty string");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(str.c_str(), &end, 10);
  if (*end != '\0') return fail("expected an integer, got '", str, "'");
  if (errno == ERANGE) return fail("integer out of range: '", str, "'");
  return int64_t(v);
}

Result<uint64_t> parse_uint(std::string_view s) {
  std::string str(trim(s));
  if (str.empty() || str[0] == '-')
    return fail("expected a non-negative integer, got '", str, "'");
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(str.c_str(), &end, 10);
  if (*end != '\0') return fail("expected a non-negative integer, got '", str, "'");
  if (errno == ERANGE) return fail("integer out of range: '", str, "'");
  return uint64_t(v);
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Result<double> parse_double(std::string_view s) {
  std::string str(trim(s));
  if (str.empty()) return fail("expected a number, got an empty string");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(str.c_str(), &end);
  if (*end != '\0' || errno == ERANGE) return fail("expected a number, got '", str, "'");
  return v;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions
  // ("jbo" -> "job" is one edit) each cost 1.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  // Accept at most a third of the word's length in edits (and at least 1, at most 3).
  size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::string best;
  size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string m = closest_match(word, candidates);
  return m.empty() ? std::string() : " (did you mean '" + m + "'?)";
}

std::string clip(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n)) + "…";
}

std::string shown_input(std::string_view s, size_t n) {
  std::string out;
  for (unsigned char c : s.substr(0, n)) {
    if (c >= 0x20 && c != 0x7f) {
      out += char(c);
      continue;
    }
    const char* hex = "0123456789abcdef";
    out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
  }
  return s.size() > n ? out + "… (" + std::to_string(s.size()) + " bytes)" : out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace sal

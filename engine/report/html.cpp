// html.cpp — see html.h.
#include "report/html.h"

#include <cmath>
#include <cstdio>

namespace sal::report {
namespace {

const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       max-width: 1000px; margin: 24px auto; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 2px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
h3 { font-size: 14px; margin: 14px 0 4px; }
.sub { color: #555; margin-top: 0; }
.caption { color: #555; font-size: 13px; margin: 2px 0 8px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tr.failure td { background: #fdecec; }
tr.recovery td { background: #ebf7ec; }
tr.stop td { background: #eceff1; }
tr.action td { background: #f6eefa; }
.controls { margin: 6px 0; font-size: 13px; }
.controls label { margin-right: 12px; }
.pager { margin: 0 6px; color: #444; }
.pass { color: #fff; background: #2e7d32; padding: 0 6px; border-radius: 3px; font-weight: 600; }
.fail { color: #fff; background: #c62828; padding: 0 6px; border-radius: 3px; font-weight: 600; }
svg { max-width: 100%; height: auto; display: block; margin: 4px 0 8px; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
)";

}  // namespace

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(std::optional<double> v, int decimals) {
  if (!v || !std::isfinite(*v)) return kMissing;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, *v);
  return buf;
}

std::string seconds(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return kMissing;
  return num(v, std::fabs(*v) < 10 ? 2 : 1) + " s";
}

std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                  const std::vector<std::string>& row_classes) {
  std::string out = "<table>\n";
  if (!head.empty()) {
    out += "<tr>";
    for (const auto& h : head) out += "<th>" + h + "</th>";
    out += "</tr>\n";
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    bool styled = r < row_classes.size() && !row_classes[r].empty();
    out += styled ? "<tr class=\"" + row_classes[r] + "\">" : std::string("<tr>");
    for (const auto& cell : rows[r]) out += "<td>" + cell + "</td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string pass_fail(bool ok) { return ok ? "<span class=\"pass\">PASS</span>" : "<span class=\"fail\">FAIL</span>"; }

std::string page_begin(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
}

std::string page_end() { return "</body>\n</html>\n"; }

std::string section(const std::string& heading, const std::string& body, const std::string& caption) {
  std::string out = "<section>\n<h2>" + escape(heading) + "</h2>\n";
  if (!caption.empty()) out += "<p class=\"caption\">" + escape(caption) + "</p>\n";
  return out + body + "</section>\n";
}

}  // namespace sal::report

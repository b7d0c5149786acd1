// html.h — the HTML side of the reports: escaping, number formatting ("–" for what is missing),
// tables, and the page frame with its inline style sheet (no external assets).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sal::report {

// Escapes & < > " ' for text and attribute values.
std::string escape(std::string_view s);

// The placeholder shown for a value a run did not record.
inline constexpr const char* kMissing = "–";

// `v` with `decimals` digits after the point; kMissing when absent or not finite.
std::string num(std::optional<double> v, int decimals = 0);
// `v` seconds as "12.3 s"; kMissing when absent.
std::string seconds(std::optional<double> v);

// A table; `head` (no header row when empty) and `rows` hold HTML (escape text before passing it). `row_classes`, when
// given, holds a CSS class per row ("" for none).
std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                  const std::vector<std::string>& row_classes = {});
// <span class="pass">PASS</span> or <span class="fail">FAIL</span>.
std::string pass_fail(bool ok);

// The page up to and including <body>, with `title` (text) in <title>; and the closing tags.
std::string page_begin(const std::string& title);
std::string page_end();

// A <section> with a heading (text), optional caption (text) and body (HTML).
std::string section(const std::string& heading, const std::string& body, const std::string& caption = "");

}  // namespace sal::report

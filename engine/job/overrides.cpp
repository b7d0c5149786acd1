// overrides.cpp — see overrides.h. The text becomes
//   local __sal_job = (function(...) <the job file's first line>
//   <the rest of the job file>
//   end)(...)
//   local function __sal_set(spec, value, path) ... end   -- walks path, creating tables
//   __sal_set("train.lr=0.1", 0.1, {"train", "lr"})
//   return __sal_job
// so every line of the job file keeps its number in error messages.
#include "job/overrides.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sal::job {
namespace {

bool identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// A Lua string literal of s (every byte outside printable ASCII, the quote and the backslash escaped).
std::string lua_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c > 0x7e) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03u", unsigned(c));
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

// The Lua literal of an override's value (overrides.h says which).
std::string lua_value(const std::string& v) {
  if (v == "true" || v == "false") return v;
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
    return lua_string(v.substr(1, v.size() - 2));
  if (!v.empty()) {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() + v.size() && std::isfinite(d)) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", d);
      return buf;
    }
  }
  return lua_string(v);
}

Result<std::vector<std::string>> path_of(const std::string& path, const std::string& spec) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    const size_t dot = path.find('.', at);
    std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (!identifier(part))
      return fail("--set ", spec, ": '", path, "' is not a key path (names of letters, digits and _, joined by dots)");
    parts.push_back(std::move(part));
    if (dot == std::string::npos) return parts;
    at = dot + 1;
  }
}

constexpr const char* kSetter = R"(local function __sal_set(spec, value, path)
  local t, at = __sal_job, ""
  if type(t) ~= "table" then error("--set " .. spec .. ": the job file did not return a table", 0) end
  for i = 1, #path - 1 do
    at = (i == 1) and path[i] or (at .. "." .. path[i])
    if t[path[i]] == nil then t[path[i]] = {} end
    if type(t[path[i]]) ~= "table" then
      error("--set " .. spec .. ": " .. at .. " is a " .. type(t[path[i]]) .. ", not a table", 0)
    end
    t = t[path[i]]
  end
  t[path[#path]] = value
end
)";

}  // namespace

Result<std::string> apply_overrides(const std::string& text, const Overrides& sets) {
  if (sets.empty()) return text;
  std::string tail = "\nend)(...)\n-- salamander --set\n";
  tail += kSetter;
  for (const auto& [path, value] : sets) {
    const std::string spec = path + "=" + value;
    auto parts = path_of(path, spec);
    if (!parts) return parts.error();
    std::string list = "{";
    for (size_t i = 0; i < parts->size(); ++i) list += (i ? ", " : "") + lua_string((*parts)[i]);
    tail += "__sal_set(" + lua_string(spec) + ", " + lua_value(value) + ", " + list + "})\n";
  }
  tail += "return __sal_job\n";
  return "local __sal_job = (function(...) " + text + tail;
}

}  // namespace sal::job

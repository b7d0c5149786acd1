// options.cpp — see options.h.
#include "cli/options.h"

#include <algorithm>

#include "core/strings.h"

namespace sal::cli {

const std::vector<OptSpec>& common_options() {
  static const std::vector<OptSpec> kCommon = {
      {"--log-level", "LEVEL", "trace, debug, info, warn, error (default info)"},
      {"--log-format", "FORMAT", "plain or json (default plain)"},
      {"--log-file", "FILE", "also write the log to FILE"},
      {"--help", "", "show this help"},
  };
  return kCommon;
}

bool Parsed::has(const std::string& name) const {
  return values.count(name) || std::find(flags.begin(), flags.end(), name) != flags.end();
}

std::optional<std::string> Parsed::get(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::string Parsed::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

Result<int64_t> Parsed::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  auto v = get(name);
  if (!v) return fallback;
  auto n = parse_int(*v);
  if (!n) return Error(name + ": " + n.error().message());
  if (*n < lo || *n > hi) return fail(name, ": ", *n, " is outside [", lo, ", ", hi, "]");
  return *n;
}

Result<double> Parsed::get_double(const std::string& name, std::optional<double> fallback) const {
  auto v = get(name);
  if (!v) {
    if (fallback) return *fallback;
    return fail(name, " is required");
  }
  auto d = parse_double(*v);
  if (!d) return fail(name, ": expected a number, got '", *v, "'");
  return *d;
}

Result<Parsed> parse(const Command& cmd, const std::vector<std::string>& args) {
  std::vector<OptSpec> all = cmd.options;
  all.insert(all.end(), common_options().begin(), common_options().end());
  std::vector<std::string> names;
  for (auto& o : all) names.push_back(o.name);
  Parsed p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") {
      p.positional.push_back(a);
      continue;
    }
    std::string name = a, inline_value;
    bool has_inline = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
      has_inline = true;
    }
    auto spec = std::find_if(all.begin(), all.end(), [&](const OptSpec& o) { return o.name == name; });
    if (spec == all.end())
      return fail("unknown option ", name, did_you_mean(name, names), " — see salamander ", cmd.name, " --help");
    if (spec->metavar.empty()) {
      if (has_inline) return fail(name, " takes no value");
      p.flags.push_back(name);
      continue;
    }
    std::string value;
    if (has_inline) {
      value = inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return fail(name, " needs a value (", spec->metavar, ")");
    }
    // a list option (PATH=VALUE,...) given again adds to the list: --set a=1 --set b=2 sets both
    const bool list = spec->metavar.size() > 4 && spec->metavar.compare(spec->metavar.size() - 4, 4, ",...") == 0;
    auto [it, fresh] = p.values.emplace(name, value);
    if (!fresh) it->second = list ? it->second + "," + value : value;
  }
  if (p.has("--help")) return p;
  if (p.positional.size() > cmd.max_positional)
    return fail("unexpected argument '", p.positional[cmd.max_positional], "' — usage: salamander ", cmd.synopsis);
  return p;
}

std::string usage(const Command& cmd) {
  std::string out = "usage: salamander " + cmd.synopsis + "\n\n" + cmd.summary + "\n\noptions:\n";
  auto row = [&](const OptSpec& o) {
    std::string left = "  " + o.name + (o.metavar.empty() ? "" : " " + o.metavar);
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + o.help + "\n";
  };
  for (auto& o : cmd.options) row(o);
  for (auto& o : common_options()) row(o);
  return out;
}

}  // namespace sal::cli

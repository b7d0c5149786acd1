// racks.cpp — see racks.h.
#include "job/racks.h"

#include <cctype>
#include <set>
#include <sstream>

#include "core/strings.h"

namespace sal::job {
namespace {

bool is_rack_name(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

std::string trimmed(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\n"), b = s.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

Result<std::map<std::string, std::string>> parse_racks(const std::string& text) {
  std::map<std::string, std::string> rack_of;
  std::set<std::string> racks;
  std::istringstream parts(text);
  std::string part;
  for (int n = 1; std::getline(parts, part, ';'); ++n) {
    part = trimmed(part);
    if (part.empty()) continue;
    const size_t colon = part.find(':');
    if (colon == std::string::npos)
      return fail("part ", n, " \"", clip(part, 40), "\" is not RACK: NODE NODE ... (a rack name, a colon, node names)");
    const std::string rack = trimmed(part.substr(0, colon));
    if (!is_rack_name(rack))
      return fail("part ", n, ": \"", clip(rack, 40), "\" is not a rack name (letters, digits, '_', '-', '.')");
    if (!racks.insert(rack).second) return fail("rack \"", rack, "\" is named twice");
    std::istringstream nodes(part.substr(colon + 1));
    std::string node;
    size_t count = 0;
    while (nodes >> node) {
      ++count;
      auto [it, fresh] = rack_of.emplace(node, rack);
      if (!fresh) return fail("node \"", clip(node, 40), "\" is in rack \"", it->second, "\" and in rack \"", rack, "\"");
    }
    if (count == 0) return fail("rack \"", rack, "\" names no node");
  }
  return rack_of;
}

}  // namespace sal::job

// sources.cpp — see sources.h.
#include "policy/sources.h"

#include <sys/stat.h>

#include <cstdlib>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::policy {
namespace {

constexpr size_t kMaxPolicyBytes = 1u << 20;

bool is_dir(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool looks_like_source(const std::string& s) {
  return s.find('\n') != std::string::npos || s.find("return") != std::string::npos;
}

bool valid_name(const std::string& n) {
  if (n.empty()) return false;
  for (unsigned char c : n)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

}  // namespace

SourceResolver::SourceResolver(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {
  if (!dirs_.empty()) return;
  if (const char* env = std::getenv("SALAMANDER_POLICIES"); env && *env) dirs_.push_back(env);
  if (auto exe = self_exe(); exe.ok()) {
    std::string beside = dir_name(dir_name(*exe)) + "/policies";
    if (is_dir(beside)) dirs_.push_back(beside);
  }
}

Result<Source> SourceResolver::named(const std::string& folder, const std::string& name) const {
  for (const auto& d : dirs_) {
    std::string path = d + "/" + folder + "/" + name + ".lua";
    struct stat st{};
    if (stat(path.c_str(), &st) != 0) continue;
    auto text = read_file(path, kMaxPolicyBytes);
    if (!text) return text.error();
    return Source{*text, path};
  }
  for (const auto& [key, text] : embedded_policies())
    if (key == folder + "/" + name) return Source{text, "embedded:" + key};
  std::vector<std::string> known;
  for (const auto& [key, text] : embedded_policies())
    if (key.rfind(folder + "/", 0) == 0) known.push_back(key.substr(folder.size() + 1));
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  return fail("no ", folder, " policy named '", shown_input(name), "' (shipped: ", list.empty() ? "none" : list, ")");
}

Source given_source(std::string text, std::string name) { return Source{std::move(text), std::move(name), true}; }

Result<Source> SourceResolver::resolve(Kind kind, const std::string& what, const std::string& base_dir) const {
  if (looks_like_source(what)) return given_source(what, "repl");
  if (what.size() > 4 && what.substr(what.size() - 4) == ".lua") {
    std::string path = base_dir.empty() || what[0] == '/' ? what : base_dir + "/" + what;
    auto text = read_file(path, kMaxPolicyBytes);
    if (!text) return text.error();
    return Source{*text, path};
  }
  if (!valid_name(what)) return fail("'", shown_input(what), "' is neither a policy name, a .lua path, nor Lua source");
  return named(std::string(kind_name(kind)), what);
}

Result<Source> SourceResolver::library(const std::string& name) const { return named("lib", name); }

Result<Source> SourceResolver::reread(const Source& s) const {
  if (s.given) return s;
  if (s.origin.rfind("embedded:", 0) == 0) {
    auto slash = s.origin.find('/');
    // A checkout's copy wins over the embedded one, as for a first load.
    return named(s.origin.substr(9, slash - 9), s.origin.substr(slash + 1));
  }
  auto text = read_file(s.origin, kMaxPolicyBytes);
  if (!text) return text.error();
  return Source{*text, s.origin};
}

std::vector<std::string> SourceResolver::shipped(Kind kind) const {
  std::vector<std::string> out;
  std::string prefix = std::string(kind_name(kind)) + "/";
  for (const auto& [key, text] : embedded_policies())
    if (key.rfind(prefix, 0) == 0) out.push_back(key.substr(prefix.size()));
  return out;
}

}  // namespace sal::policy

// http_auth.cpp — see http_auth.h.
#include "core/http_auth.h"

#include <array>

#include "core/paths.h"
#include "core/strings.h"

namespace sal {
namespace {

// Credential files are a line or a few dozen: anything larger is not one.
constexpr size_t kMaxCredentialFile = 64u << 10;

// Equal in time that does not depend on where they differ (only on b's length).
bool same(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ b[i]);
  return diff == 0;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_users(const std::string& text, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  auto lines = split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line(trim(lines[i]));
    if (line.empty() || line[0] == '#') continue;
    auto space = line.find_first_of(" \t");
    if (space == std::string::npos)
      return fail(path, ":", i + 1, ": expected '<name> <password>'");
    std::string name = line.substr(0, space), password(trim(line.substr(space + 1)));
    if (password.empty() || name.find(':') != std::string::npos)
      return fail(path, ":", i + 1, ": expected '<name> <password>' (a name without ':')");
    out.emplace_back(name, password);
  }
  if (out.empty()) return fail(path, ": no users");
  return out;
}

}  // namespace

std::string base64_decode(std::string_view text) {
  static const std::array<int, 256> kValue = [] {
    std::array<int, 256> v{};
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(alphabet[i])] = i;
    return v;
  }();
  std::string out;
  uint32_t bits = 0;
  int have = 0;
  for (char c : text) {
    if (c == '=') break;
    int v = kValue[static_cast<unsigned char>(c)];
    if (v < 0) return {};
    bits = (bits << 6) | uint32_t(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out += char((bits >> have) & 0xff);
    }
  }
  return out;
}

Result<HttpCredentials> load_http_credentials(const std::string& token_file, const std::string& users_file) {
  HttpCredentials c;
  if (!token_file.empty()) {
    auto text = read_file(token_file, kMaxCredentialFile);
    if (!text) return text.error();
    c.token = std::string(trim(split(*text, '\n').front()));
    if (c.token.size() < kMinTokenChars)
      return fail(token_file, ": a token of at least ", kMinTokenChars, " characters is needed, found ", c.token.size());
  }
  if (!users_file.empty()) {
    auto text = read_file(users_file, kMaxCredentialFile);
    if (!text) return text.error();
    auto users = parse_users(*text, users_file);
    if (!users) return users.error();
    c.users = std::move(*users);
  }
  return c;
}

bool http_authorized(const HttpCredentials& creds, const char* authorization) {
  if (!authorization) return false;
  std::string_view h(authorization);
  if (!creds.token.empty() && h.rfind("Bearer ", 0) == 0) return same(trim(h.substr(7)), creds.token);
  if (creds.users.empty() || h.rfind("Basic ", 0) != 0) return false;
  std::string pair = base64_decode(trim(h.substr(6)));
  auto colon = pair.find(':');
  if (colon == std::string::npos) return false;
  std::string_view name(pair.data(), colon), password(pair.data() + colon + 1, pair.size() - colon - 1);
  bool ok = false;
  for (const auto& [n, p] : creds.users) ok |= same(name, n) & same(password, p);  // every entry, every time
  return ok;
}

}  // namespace sal

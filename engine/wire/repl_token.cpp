// repl_token.cpp — see repl_token.h.
#include "wire/repl_token.h"

#include <sys/random.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::wire {

constexpr size_t kTokenBytes = 32;
constexpr size_t kTokenFileMax = 4096;

Result<std::string> make_repl_token() {
  unsigned char raw[kTokenBytes];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("getrandom: ", std::strerror(errno));
    got += size_t(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

std::string repl_token_path(const std::string& dir, const std::string& endpoint) {
  std::string name;
  for (unsigned char c : endpoint) name += std::isalnum(c) ? char(c) : '-';
  return dir + "/repl-" + name + ".token";
}

Result<std::string> read_repl_token(const std::string& path) {
  auto text = read_file(path, kTokenFileMax);
  if (!text) return text.error();
  std::string token(trim(*text));
  if (token.empty()) return fail(path, ": holds no token");
  return token;
}

std::string find_repl_token(const std::string& endpoint) {
  auto dir = runtime_dir();
  if (!dir) return "";
  auto token = read_repl_token(repl_token_path(*dir, endpoint));
  return token ? *token : "";
}

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace sal::wire

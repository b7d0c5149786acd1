// http_bind.cpp — see http_bind.h.
#include "core/http_bind.h"

#include <optional>

#include "core/strings.h"

namespace sal {

// The loopback address a bare PORT binds.
constexpr const char* kLoopback = "127.0.0.1";

namespace {

// A port in [1, 65535], or 0 for `*`.
std::optional<uint16_t> parse_port(std::string_view text) {
  if (text == "*") return uint16_t(0);
  auto n = parse_int(text);
  if (!n || *n < 1 || *n > 65535) return std::nullopt;
  return uint16_t(*n);
}

Error expected(std::string_view text, const std::string& why) {
  return fail("\"", std::string(text), "\" ", why,
              " (expected tcp://HOST:PORT with PORT a number or * for any free port, or a bare PORT for loopback)");
}

}  // namespace

Result<HttpBind> parse_http_bind(std::string_view text) {
  if (text.empty()) return expected(text, "is empty");
  constexpr std::string_view kScheme = "tcp://";
  if (text.substr(0, kScheme.size()) != kScheme) {
    if (text.find_first_of(":/") != std::string_view::npos) return expected(text, "is not an endpoint");
    auto port = parse_port(text);
    if (!port) return expected(text, "is not a port");
    return HttpBind{kLoopback, *port};
  }
  std::string_view rest = text.substr(kScheme.size());
  auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return expected(text, "has no HOST:PORT");
  std::string host(rest.substr(0, colon));
  if (host.find('/') != std::string::npos) return expected(text, "has a path");
  auto port = parse_port(rest.substr(colon + 1));
  if (!port) return expected(text, "has a bad port (a number in [1, 65535], or *)");
  return HttpBind{host == "*" ? "0.0.0.0" : host, *port};
}

std::string listen_address(const HttpBind& b) { return b.host + ":" + std::to_string(b.port); }

}  // namespace sal

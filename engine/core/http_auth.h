// http_auth.h — who may read an HTTP endpoint (the controller's Prometheus endpoint, metrics.token
// and metrics.users): a bearer token (`Authorization: Bearer <token>`, what Prometheus's
// `authorization` block sends) and/or named users with passwords (`Authorization: Basic …`, its
// `basic_auth`). The credentials are read from files the job names, so they stay out of the job
// file; a request is checked against them in constant time.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace sal {

struct HttpCredentials {
  std::string token;                                       // "" : no bearer token accepted
  std::vector<std::pair<std::string, std::string>> users;  // (name, password)
  bool empty() const { return token.empty() && users.empty(); }
};

// A token shorter than this is refused: a scraper's secret, not a password a person types.
constexpr size_t kMinTokenChars = 16;

// Reads the token file (its first line, trimmed) and the users file ("<name> <password>" per line,
// # comments); either path may be empty. Errors name the file and the line.
Result<HttpCredentials> load_http_credentials(const std::string& token_file, const std::string& users_file);

// Whether the value of an Authorization header (null: none sent) carries the token or a listed
// user's password.
bool http_authorized(const HttpCredentials& creds, const char* authorization);

// Standard base64 (RFC 4648) decoding; nothing where the text is not base64.
std::string base64_decode(std::string_view text);

}  // namespace sal

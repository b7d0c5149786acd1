// http_bind.h — where an HTTP endpoint listens (the controller's Prometheus endpoint: the job key
// metrics.bind and the --metrics flag), written as every other endpoint is written:
// `tcp://HOST:PORT`, with PORT `*` for any free port (the one bound is printed), and HOST `*` for
// every interface. A bare `PORT` (or `*`) means loopback, 127.0.0.1. The job schema checks the text
// with this parser and the controller binds what it returns, so both read it the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace sal {

struct HttpBind {
  std::string host;   // "127.0.0.1", "0.0.0.0" (every interface), "localhost", "[::1]", ...
  uint16_t port = 0;  // 0: any free port
};

// "tcp://127.0.0.1:9464" -> {127.0.0.1, 9464}; "tcp://*:9464" -> {0.0.0.0, 9464}; "9464" and "*" ->
// loopback. An error says what was expected.
Result<HttpBind> parse_http_bind(std::string_view text);

// "127.0.0.1:9464": the host and port as an HTTP server's listening address.
std::string listen_address(const HttpBind& b);

}  // namespace sal

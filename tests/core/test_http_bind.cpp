// test_http_bind.cpp — where the metrics endpoint listens, as metrics.bind and --metrics write it.
#include <doctest/doctest.h>

#include "core/http_bind.h"

using namespace sal;

TEST_CASE("tcp://HOST:PORT, * for any free port or every interface, a bare PORT on loopback") {
  auto b = parse_http_bind("tcp://127.0.0.1:9464");
  REQUIRE(b.ok());
  CHECK(b->host == "127.0.0.1");
  CHECK(b->port == 9464);
  CHECK(parse_http_bind("tcp://127.0.0.1:*")->port == 0);
  CHECK(parse_http_bind("tcp://*:9464")->host == "0.0.0.0");
  CHECK(parse_http_bind("9464")->host == "127.0.0.1");
  CHECK(parse_http_bind("*")->port == 0);
  CHECK(parse_http_bind("tcp://[::1]:80")->host == "[::1]");
  CHECK(listen_address(*parse_http_bind("9464")) == "127.0.0.1:9464");
}

TEST_CASE("anything else says what was expected") {
  for (const char* bad : {"", "http://127.0.0.1:80", "tcp://127.0.0.1", "tcp://:80", "tcp://h:0", "tcp://h:65536",
                          "tcp://h:x", "tcp://h/x:80", "ipc:///tmp/m", "0", "-1", "abc"}) {
    CAPTURE(bad);
    auto b = parse_http_bind(bad);
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().message().find("expected tcp://HOST:PORT") != std::string::npos);
  }
  CHECK(parse_http_bind("tcp://h:0").error().message().find("bad port") != std::string::npos);
}

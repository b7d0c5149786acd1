// test_http_auth.cpp — who may read the metrics endpoint: a bearer token or a listed user's
// password in the Authorization header, read from files, compared in constant time; malformed
// headers and files are refused with the file and the line.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <fstream>

#include "core/http_auth.h"
#include "support/temp_dirs.h"

using namespace sal;

namespace {

std::string file_with(const std::string& text) {
  std::string path = sal::test::temp_dir("http-auth") + "/f";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("base64 decodes the standard alphabet and refuses anything else") {
  CHECK(base64_decode("cHJvbTpzM2NyZXQ=") == "prom:s3cret");
  CHECK(base64_decode("YQ==") == "a");
  CHECK(base64_decode("not base64!").empty());
}

TEST_CASE("a bearer token and basic users are accepted, and nothing else") {
  auto c = load_http_credentials(file_with("  0123456789abcdef0123 \n"), file_with("# who\nprom s3cret\nann other pass\n"));
  REQUIRE_MESSAGE(c.ok(), c.error().message());
  CHECK(http_authorized(*c, "Bearer 0123456789abcdef0123"));
  CHECK_FALSE(http_authorized(*c, "Bearer 0123456789abcdef012"));
  CHECK_FALSE(http_authorized(*c, "Bearer 0123456789abcdef01234"));
  CHECK(http_authorized(*c, "Basic cHJvbTpzM2NyZXQ="));           // prom:s3cret
  CHECK(http_authorized(*c, "Basic YW5uOm90aGVyIHBhc3M="));       // ann:other pass
  CHECK_FALSE(http_authorized(*c, "Basic cHJvbTpzM2NyZXQx"));     // prom:s3cret1
  CHECK_FALSE(http_authorized(*c, "Basic bm9jb2xvbg=="));         // nocolon
  CHECK_FALSE(http_authorized(*c, "Digest x"));
  CHECK_FALSE(http_authorized(*c, nullptr));
  auto only_token = load_http_credentials(file_with("0123456789abcdef0123"), "");
  REQUIRE(only_token.ok());
  CHECK_FALSE(http_authorized(*only_token, "Basic cHJvbTpzM2NyZXQ="));
}

TEST_CASE("credential files that are not are refused, naming the file and the line") {
  CHECK(load_http_credentials(file_with("short"), "").error().message().find("at least 16 characters") !=
        std::string::npos);
  auto bad = load_http_credentials("", file_with("prom\n"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find(":1: expected '<name> <password>'") != std::string::npos);
  CHECK(load_http_credentials("", file_with("# only a comment\n")).error().message().find("no users") !=
        std::string::npos);
  CHECK_FALSE(load_http_credentials("/nonexistent/token", "").ok());
  CHECK(load_http_credentials("", "").ok());
}

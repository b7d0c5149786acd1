// test_strings.cpp — text helpers: JSON quoting, strict number parsing, suggestions.
#include <doctest/doctest.h>

#include "core/strings.h"

using namespace sal;

TEST_CASE("json_quote escapes quotes, backslashes and control bytes") {
  CHECK(json_quote("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  CHECK(json_quote(std::string("\x01", 1)) == "\"\\u0001\"");
}

TEST_CASE("parse_int and parse_uint reject partial and signed input") {
  CHECK(parse_int("42").value() == 42);
  CHECK(parse_int(" -7 ").value() == -7);
  CHECK_FALSE(parse_int("12x").ok());
  CHECK_FALSE(parse_int("").ok());
  CHECK_FALSE(parse_uint("-1").ok());
  CHECK(parse_int("99999999999999999999").error().message().find("out of range") != std::string::npos);
}

TEST_CASE("edit distance counts a transposition as one edit") {
  CHECK(edit_distance("job", "jbo") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(did_you_mean("heartbeatms", {"heartbeat_ms", "miss_limit"}) == " (did you mean 'heartbeat_ms'?)");
  CHECK(did_you_mean("zzz", {"heartbeat_ms"}).empty());
}

TEST_CASE("split, join and trim") {
  CHECK(split("a,b,,c", ',') == std::vector<std::string>{"a", "b", "", "c"});
  CHECK(join({"a", "b"}, ", ") == "a, b");
  CHECK(trim("  x y \n") == "x y");
}

TEST_CASE("input echoed in an error: clipped with its size, control bytes escaped") {
  CHECK(shown_input("mro") == "mro");
  CHECK(shown_input(std::string("a\0b\n", 4)) == "a\\x00b\\x0a");
  CHECK(shown_input(std::string(100, 'x'), 10) == "xxxxxxxxxx… (100 bytes)");
}

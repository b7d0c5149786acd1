// test_devices.cpp — device specs as operators write them.
#include <doctest/doctest.h>

#include "core/devices.h"

using namespace sal;

TEST_CASE("cpu:K expands to K CPU devices") {
  auto d = parse_devices("cpu:3");
  REQUIRE(d.ok());
  CHECK(*d == std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2"});
}

TEST_CASE("cuda lists ordinals and rejects repeats and junk") {
  CHECK(*parse_devices("cuda:0,2") == std::vector<std::string>{"cuda:0", "cuda:2"});
  CHECK_FALSE(parse_devices("cuda:0,0").ok());
  CHECK_FALSE(parse_devices("cuda:x").ok());
  CHECK_FALSE(parse_devices("cpu:0").ok());
  CHECK_FALSE(parse_devices("tpu:1").ok());
  CHECK(parse_devices("gpu").error().message().find("expected cpu:K") != std::string::npos);
}

TEST_CASE("device names") {
  CHECK(valid_device_name("cpu:0"));
  CHECK(valid_device_name("cuda:7"));
  CHECK_FALSE(valid_device_name("cuda:"));
  CHECK_FALSE(valid_device_name("cpu:999"));
}

// test_security.cpp — key files and allowlists: good ones load, bad ones are refused by line.
#include <doctest/doctest.h>

#include <unistd.h>

#include "core/paths.h"
#include "mesh/security.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::mesh;

TEST_CASE("generated key files load back, and the .pub has no secret") {
  std::string d = sal::test::temp_dir("sec");
  auto kp = wire::generate_key_files(d + "/ctl");
  REQUIRE(kp.ok());
  auto full = load_key_file(d + "/ctl.key");
  REQUIRE(full.ok());
  CHECK(full->public_key == kp->public_key);
  CHECK(full->secret_key == kp->secret_key);
  auto pub = load_key_file(d + "/ctl.pub");
  REQUIRE(pub.ok());
  CHECK(pub->secret_key.empty());
  CHECK(wire::resolve_public_key(d + "/ctl.pub").value() == kp->public_key);
  CHECK(wire::resolve_public_key(kp->public_key).value() == kp->public_key);
  CHECK_FALSE(wire::resolve_public_key("not-a-key").ok());
}

TEST_CASE("allowlists name the bad line") {
  std::string d = sal::test::temp_dir("sec");
  auto kp = wire::generate_key_files(d + "/op");
  REQUIRE(kp.ok());
  REQUIRE(write_file(d + "/allow", "# operators\n" + kp->public_key + " admin alice\n").ok());
  auto a = Allowlist::load(d + "/allow");
  REQUIRE(a.ok());
  CHECK(a->find_key(kp->public_key)->name == "alice");
  CHECK(session_role("alice", &*a) == Role::admin);
  CHECK_FALSE(session_role("mallory", &*a).has_value());
  CHECK(session_role("", nullptr) == Role::admin);

  REQUIRE(write_file(d + "/bad", kp->public_key + " root alice\n").ok());
  CHECK(Allowlist::load(d + "/bad").error().message().find("bad:1: unknown role 'root'") != std::string::npos);
  REQUIRE(write_file(d + "/bad2", "\nshort admin bob\n").ok());
  CHECK(Allowlist::load(d + "/bad2").error().message().find("bad2:2: not a 40-character Z85") != std::string::npos);
}

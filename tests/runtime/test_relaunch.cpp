// test_relaunch.cpp — the plan a relaunched worker carries into its new image (runtime/relaunch.h):
// what pending_file() writes, take_pending() reads back frame for frame from an inheritable
// descriptor, which it closes; a file cut short or claiming impossible sizes is an error that
// names the descriptor, never a crash. (relaunch() itself replaces the process image: t0523 runs
// it in real workers.)
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "runtime/relaunch.h"

using namespace sal;
using namespace sal::runtime;

namespace {

wire::Parts two_frames() {
  wire::Parts p;
  p.emplace_back("header", 6);
  std::string big(100000, 'x');
  big[4321] = 'y';
  p.emplace_back(big.data(), big.size());
  return p;
}

}  // namespace

TEST_CASE("the pending plan's frames come back as they were written, from a descriptor a new image inherits") {
  auto fd = pending_file(two_frames());
  REQUIRE(fd.ok());
  CHECK((::fcntl(*fd, F_GETFD) & FD_CLOEXEC) == 0);  // it must survive exec
  auto back = take_pending(*fd);
  REQUIRE(back.ok());
  auto want = two_frames();
  REQUIRE(back->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE((*back)[i].size() == want[i].size());
    CHECK(std::memcmp((*back)[i].data(), want[i].data(), want[i].size()) == 0);
  }
  CHECK(::fcntl(*fd, F_GETFD) == -1);  // closed once read
}

TEST_CASE("a pending plan cut short or claiming impossible sizes is an error naming its descriptor") {
  auto whole = pending_file(two_frames());
  REQUIRE(whole.ok());
  off_t size = ::lseek(*whole, 0, SEEK_END);
  REQUIRE(::ftruncate(*whole, size - 10) == 0);  // the second frame ends early
  auto cut = take_pending(*whole);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().message().find("ends early") != std::string::npos);
  CHECK(cut.error().message().find("descriptor " + std::to_string(*whole)) != std::string::npos);

  wire::Parts one;
  one.emplace_back("x", 1);
  auto claims = pending_file(one);
  REQUIRE(claims.ok());
  uint32_t frames = 1000000;  // more frames than any message has
  REQUIRE(::pwrite(*claims, &frames, sizeof frames, 0) == ssize_t(sizeof frames));
  auto bad = take_pending(*claims);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("claims 1000000 frames") != std::string::npos);

  auto empty = pending_file({});
  REQUIRE(empty.ok());
  auto none = take_pending(*empty);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

// test_slice_mac.cpp — the keyed MAC on sparse snapshot slices: a sealed slot unseals with the
// job's key and with no other; a flipped bit in any frame, a frame dropped, added or moved, or no
// MAC at all is refused; the run's key survives in the run directory, private to its owner.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <sys/stat.h>

#include "ckpt/slice_mac.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::ckpt;

namespace {

wire::Parts frames() {
  wire::Parts p;
  for (const std::string& f : {std::string("head"), std::string("body"), std::string(1000, 'w'), std::string("m")})
    p.emplace_back(f.data(), f.size());
  return p;
}

}  // namespace

TEST_CASE("a sealed slot unseals with the job's key, and nothing else passes") {
  auto key = new_slice_mac_key(), other = new_slice_mac_key();
  auto sealed = frames();
  seal(sealed, key);
  CHECK(sealed.size() == 5);
  auto copy = [&] {
    wire::Parts c;
    for (auto& f : sealed) c.emplace_back().copy(f);
    return c;
  };
  auto good = copy();
  REQUIRE(unseal(good, key).ok());
  CHECK(good.size() == 4);
  auto wrong_key = copy();
  CHECK(unseal(wrong_key, other).error().message().find("MAC does not match") != std::string::npos);
  auto flipped = copy();
  static_cast<char*>(flipped[2].data())[500] ^= 1;
  CHECK_FALSE(unseal(flipped, key).ok());
  auto nonce = copy();  // the nonce draws the one-time key: another nonce, another key
  static_cast<char*>(nonce.back().data())[0] ^= 1;
  CHECK_FALSE(unseal(nonce, key).ok());
  auto again = frames();  // a fresh nonce per seal: the same slot never gets the same last frame
  seal(again, key);
  CHECK(again.back().to_string() != sealed.back().to_string());
  // Moving bytes from one frame to the next keeps the concatenation but not the MAC.
  wire::Parts moved;
  moved.emplace_back(std::string("hea"));
  moved.emplace_back(std::string("dbody"));
  for (size_t i = 2; i < sealed.size(); ++i) moved.emplace_back().copy(sealed[i]);
  CHECK_FALSE(unseal(moved, key).ok());
  auto bare = frames();
  CHECK(unseal(bare, key).error().message().find("carries no MAC") != std::string::npos);
}

TEST_CASE("keys parse from their hex and the run's key is kept, readable by its owner only") {
  auto k = new_slice_mac_key();
  auto back = parse_slice_mac_key(k.hex());
  REQUIRE(back.ok());
  CHECK(back->bytes == k.bytes);
  CHECK_FALSE(parse_slice_mac_key("abc").ok());
  CHECK_FALSE(parse_slice_mac_key(std::string(64, 'z')).ok());
  std::string run = sal::test::temp_dir("slice-key");
  auto first = run_slice_mac_key(run);
  auto again = run_slice_mac_key(run);
  REQUIRE(first.ok());
  REQUIRE(again.ok());
  CHECK(first->bytes == again->bytes);
  struct stat st{};
  REQUIRE(stat((run + "/slice.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(run_slice_mac_key("")->bytes != run_slice_mac_key("")->bytes);  // no run directory: fresh
}

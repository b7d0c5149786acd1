// test_digest.cpp — the units' digest (core/digest.h): the same bits give the same digest; any one
// flipped bit, anywhere, changes it; flips that would cancel under a plain multiply do not; the
// length counts. And unit names read back (parse_unit_name).
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <vector>

#include "core/digest.h"
#include "core/model_shape.h"

using namespace sal;

namespace {

std::vector<float> ramp_floats(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.001f * float(i) - 0.3f;
  return x;
}

void flip(std::vector<float>& x, size_t bit) {
  uint32_t w;
  std::memcpy(&w, &x[bit / 32], 4);
  w ^= uint32_t(1) << (bit % 32);
  std::memcpy(&x[bit / 32], &w, 4);
}

}  // namespace

TEST_CASE("digest: the same floats give the same digest, and a seed chains buffers") {
  auto a = ramp_floats(1001), b = ramp_floats(1001);
  CHECK(digest_floats(a.data(), a.size()) == digest_floats(b.data(), b.size()));
  CHECK(digest_floats(a.data(), a.size(), 1) != digest_floats(a.data(), a.size(), 2));
}

TEST_CASE("digest: every single flipped bit of a buffer changes its digest") {
  auto x = ramp_floats(37);  // an odd count: the last word is half padding
  const uint64_t clean = digest_floats(x.data(), x.size());
  for (size_t bit = 0; bit < 32 * x.size(); ++bit) {
    flip(x, bit);
    CHECK_MESSAGE(digest_floats(x.data(), x.size()) != clean, "bit " << bit);
    flip(x, bit);
  }
  CHECK(digest_floats(x.data(), x.size()) == clean);
}

TEST_CASE("digest: two flips of the same high bit in words of one lane do not cancel") {
  auto x = ramp_floats(64);
  const uint64_t clean = digest_floats(x.data(), x.size());
  // words 0 and 8 go to lane 0; bit 63 of a word is the sign of its second float
  flip(x, 63);
  flip(x, 8 * 64 + 63);
  CHECK(digest_floats(x.data(), x.size()) != clean);
}

TEST_CASE("digest: a few random flips never collide over many trials, and the length counts") {
  auto x = ramp_floats(4096);
  std::set<uint64_t> seen{digest_floats(x.data(), x.size())};
  uint64_t state = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    auto y = x;
    for (int k = 0; k < 3; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      flip(y, size_t(state >> 33) % (32 * y.size()));
    }
    seen.insert(digest_floats(y.data(), y.size()));
  }
  CHECK(seen.size() > 1990);  // three flips can undo each other only where two hit the same bit
  std::vector<float> zeros(8, 0.0f);
  CHECK(digest_floats(zeros.data(), 7) != digest_floats(zeros.data(), 8));
}

TEST_CASE("unit names read back into their units, and nothing else does") {
  ModelShape s{3, 8, 5, 8, 16};
  for (const UnitId& id : model_units(s)) {
    auto back = parse_unit_name(id.name());
    REQUIRE(back);
    CHECK(*back == id);
  }
  for (const char* bad : {"", "layer", "layer.dense", "layer01.dense", "layer1.expert", "layer1.expert2x", "layer1.norm",
                          "Embedding", "layer-1.gate", "layer1.dense "})
    CHECK_MESSAGE(!parse_unit_name(bad), bad);
}

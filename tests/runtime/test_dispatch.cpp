// test_dispatch.cpp — the flexible dispatcher's schedule: hand-worked cases and randomized
// properties (every token assigned exactly once, sends equal receives, local first, each replica
// unit within one token of even).
#include <doctest/doctest.h>

#include <random>

#include "runtime/dispatch.h"

using namespace sal;
using namespace sal::runtime;

TEST_CASE("hand-worked: a hot expert on two workers, local tokens stay") {
  // expert 0: worker 0 has 10 tokens, worker 1 has 2, worker 2 has 0; replicas on workers 0 and 2.
  Counts tokens = {{10, 2, 0}}, units = {{1, 0, 1}};
  auto s = flexible_dispatch(tokens, units);
  REQUIRE(s.ok());
  CHECK(s->quota[0] == std::vector<uint32_t>{6, 0, 6});
  CHECK(s->sent(0, 0, 0) == 6);  // keeps its quota
  CHECK(s->sent(0, 0, 2) == 4);  // surplus to the spare replica
  CHECK(s->sent(0, 1, 2) == 2);  // no replica here: everything leaves
  CHECK(s->sent(0, 1, 1) == 0);
}

TEST_CASE("hand-worked: uneven totals give the first units one more") {
  Counts tokens = {{3, 2}}, units = {{2, 1}};  // 5 tokens over 3 units: 2, 2, 1
  auto s = flexible_dispatch(tokens, units);
  REQUIRE(s.ok());
  CHECK(s->quota[0] == std::vector<uint32_t>{4, 1});
  CHECK(s->sent(0, 0, 0) == 3);
  CHECK(s->sent(0, 1, 0) == 1);
  CHECK(s->sent(0, 1, 1) == 1);
}

TEST_CASE("an expert with tokens and no replica is an error") {
  auto s = flexible_dispatch({{1, 0}}, {{0, 0}});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message() == "expert 0 has 1 tokens but no replica");
  CHECK(flexible_dispatch({{0, 0}}, {{0, 0}}).ok());  // no tokens, no replica: fine
}

TEST_CASE("randomized: exactly once, sends equal receives, local first, even units") {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 500; ++trial) {
    int w = 1 + int(rng() % 8), experts = 1 + int(rng() % 12);
    Counts tokens(static_cast<size_t>(experts), std::vector<uint32_t>(static_cast<size_t>(w)));
    Counts units = tokens;
    for (int e = 0; e < experts; ++e) {
      for (int j = 0; j < w; ++j) {
        tokens[size_t(e)][size_t(j)] = rng() % 3 == 0 ? 0 : rng() % 200;
        units[size_t(e)][size_t(j)] = rng() % 3 == 0 ? rng() % 3 : 0;
      }
      units[size_t(e)][rng() % size_t(w)] += 1;  // at least one replica
    }
    auto s = flexible_dispatch(tokens, units);
    REQUIRE(s.ok());
    for (int e = 0; e < experts; ++e) {
      uint64_t total = 0, r = 0;
      for (int j = 0; j < w; ++j) {
        total += tokens[size_t(e)][size_t(j)];
        r += units[size_t(e)][size_t(j)];
      }
      for (int j = 0; j < w; ++j) {
        uint64_t out = 0, in = 0;
        for (int i = 0; i < w; ++i) {
          out += s->sent(e, j, i);
          in += s->sent(e, i, j);
        }
        CHECK(out == tokens[size_t(e)][size_t(j)]);  // every token of j goes exactly once
        CHECK(in == s->quota[size_t(e)][size_t(j)]);  // j computes exactly its quota
        uint32_t keep = std::min(tokens[size_t(e)][size_t(j)], s->quota[size_t(e)][size_t(j)]);
        CHECK(s->sent(e, j, j) == keep);  // local first
        if (units[size_t(e)][size_t(j)] > 0) {
          // per unit within one of even: quota / units in [floor, ceil] of total / r
          uint64_t q = s->quota[size_t(e)][size_t(j)], u = units[size_t(e)][size_t(j)];
          CHECK(q >= u * (total / r));
          CHECK(q <= u * (total / r + 1));
        } else {
          CHECK(s->quota[size_t(e)][size_t(j)] == 0);
        }
      }
    }
  }
}

TEST_CASE("weighted: equal weights dispatch exactly as no weights do") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t w = 1 + rng() % 6, experts = 1 + rng() % 6;
    Counts tokens(experts, std::vector<uint32_t>(w)), units = tokens;
    for (size_t e = 0; e < experts; ++e) {
      for (size_t j = 0; j < w; ++j) tokens[e][j] = rng() % 50, units[e][j] = rng() % 2;
      units[e][rng() % w] += 1;
    }
    auto even = flexible_dispatch(tokens, units);
    auto same = flexible_dispatch(tokens, units, std::vector<uint32_t>(w, 1000));
    REQUIRE(even.ok());
    REQUIRE(same.ok());
    CHECK(even->quota == same->quota);
    CHECK(even->send == same->send);
  }
}

TEST_CASE("weighted: a worker at half weight computes half a replica's tokens") {
  // 30 tokens of expert 0 over replicas on workers 0, 1, 2; worker 1 at half weight: 12, 6, 12
  Counts tokens = {{10, 10, 10}}, units = {{1, 1, 1}};
  auto s = flexible_dispatch(tokens, units, {1000, 500, 1000});
  REQUIRE(s.ok());
  CHECK(s->quota[0] == std::vector<uint32_t>{12, 6, 12});
  CHECK(s->sent(0, 1, 1) == 6);   // it keeps its quota of its own tokens
  CHECK(s->sent(0, 1, 0) == 2);   // the rest goes to the spare capacity, in worker order
  CHECK(s->sent(0, 1, 2) == 2);
  // the digest tells weighted tables apart, and an unweighted one digests as before weights existed
  CHECK(replicas_digest(units, {1000, 500, 1000}) != replicas_digest(units));
  CHECK(replicas_digest(units, {}) == replicas_digest(units));
}

TEST_CASE("weighted: wrong sizes and replicas only on weight-0 workers are errors") {
  auto bad = flexible_dispatch({{1, 1}}, {{1, 1}}, {1000});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("weights for 1 workers, expected 2") != std::string::npos);
  auto none = flexible_dispatch({{4, 0}}, {{0, 1}}, {1000, 0});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message() == "expert 0 has 4 tokens but every replica has weight 0");
}

TEST_CASE("by counts: exactly once, sends equal receives, local first, with a digest of its own") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t w = 1 + rng() % 8, experts = 1 + rng() % 12;
    Counts tokens(experts, std::vector<uint32_t>(w)), units = tokens;
    for (size_t e = 0; e < experts; ++e) {
      for (size_t j = 0; j < w; ++j) tokens[e][j] = rng() % 100, units[e][j] = rng() % 3 == 0 ? 1 : 0;
      units[e][rng() % w] += 1;
    }
    auto s = flexible_dispatch(tokens, units, {}, Split::counts);
    REQUIRE(s.ok());
    for (size_t e = 0; e < experts; ++e)
      for (size_t j = 0; j < w; ++j) {
        uint64_t out = 0, in = 0;
        for (size_t i = 0; i < w; ++i) out += s->sent(int(e), int(j), int(i)), in += s->sent(int(e), int(i), int(j));
        CHECK(out == tokens[e][j]);
        CHECK(in == s->quota[e][j]);
        CHECK(s->sent(int(e), int(j), int(j)) == std::min(tokens[e][j], s->quota[e][j]));
        if (units[e][j] == 0) CHECK(s->quota[e][j] == 0);
      }
  }
  // two experts sharing worker 1: by counts every worker computes 60, evenly worker 1 computes 90
  Counts tokens = {{90, 0, 0}, {0, 0, 90}}, units = {{1, 1, 0}, {0, 1, 1}};
  auto even = flexible_dispatch(tokens, units), counted = flexible_dispatch(tokens, units, {}, Split::counts);
  REQUIRE(even.ok());
  REQUIRE(counted.ok());
  CHECK(even->quota[0][1] + even->quota[1][1] == 90);
  CHECK(counted->quota[0][1] + counted->quota[1][1] == 60);
  CHECK(replicas_digest(units, {}, Split::counts) != replicas_digest(units));
}

// test_micro_batches.cpp — gradient accumulation's split (runtime/micro_batches.h), as pure logic:
// a rank's passes cover its share exactly, in order; every rank runs as many passes; a pass's
// balancing share is its sequences on every rank together; without micro-batches one pass.
#include <doctest/doctest.h>

#include "model/data.h"
#include "runtime/micro_batches.h"

using namespace sal;
using namespace sal::runtime;

TEST_CASE("micro-batches: each rank's passes cover its share in order, every rank as many, the balancing shares add up to 1") {
  for (int global : {1, 7, 8, 16, 33})
    for (int ranks : {1, 3, 4})
      for (int micro : {0, 1, 2, 3, 5})
        for (const std::vector<uint32_t>& shares : {std::vector<uint32_t>{}, std::vector<uint32_t>{500, 1000, 1500, 1000}}) {
          if (!shares.empty() && int(shares.size()) != ranks) continue;
          const size_t weighted = shares.size();
          CAPTURE(global);
          CAPTURE(ranks);
          CAPTURE(micro);
          CAPTURE(weighted);
          size_t passes = 0;
          for (int r = 0; r < ranks; ++r) {
            auto p = micro_passes(global, shares, ranks, r, micro);
            auto [first, count] = model::batch_share(global, shares, ranks, r);
            if (r == 0) passes = p.size();
            CHECK(p.size() == passes);  // collective passes: the same number everywhere
            int at = first;
            double aux = 0;
            for (const MicroPass& m : p) {
              CHECK(m.first == at);
              CHECK(m.count >= 0);
              if (micro > 0) CHECK(m.count <= micro);
              at += m.count;
              aux += m.aux_share;
            }
            CHECK(at == first + count);
            CHECK(aux == doctest::Approx(1.0));
          }
          if (micro == 0) CHECK(passes == 1);
        }
}

TEST_CASE("micro-batches: 8 sequences over 3 ranks, 2 at a time: 2 passes, the short rank's second one empty") {
  auto p = micro_passes(8, {}, 3, 2, 2);  // shares 3, 3, 2
  REQUIRE(p.size() == 2);
  CHECK(p[0].first == 6);
  CHECK(p[0].count == 2);
  CHECK(p[1].count == 0);
  CHECK(p[0].aux_share == doctest::Approx(6.0 / 8));
  CHECK(p[1].aux_share == doctest::Approx(2.0 / 8));
}

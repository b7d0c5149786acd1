// test_unit_writers.cpp — which ranks write each unit: `copies` of its holders (all of them when
// fewer), never an absent rank, and the writing spread over the ranks — not every non-expert unit
// and every expert on rank 0, as when the lowest holder wrote.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "plan/unit_writers.h"

using namespace sal;
using namespace sal::plan;

namespace {

// `layers` layers of `experts` experts, every one held by every one of `ranks` ranks (a grouped
// job's groups each hold the whole model).
ExpertHolders everywhere(size_t layers, size_t experts, uint32_t ranks) {
  std::vector<uint32_t> all(ranks);
  std::iota(all.begin(), all.end(), 0u);
  return ExpertHolders(layers, std::vector<std::vector<uint32_t>>(experts, all));
}

bool named(const std::vector<uint32_t>& v, uint32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("where every rank holds everything, each rank writes its share of the experts and the non-expert units") {
  // groups8's shape: 2 layers of 8 experts on 8 ranks; non-expert units of 5 sizes
  WriteRequest r{8, 1, {}, 100, {300, 120, 8, 120, 8}};
  UnitWriters w = unit_writers(everywhere(2, 8, 8), r);
  REQUIRE(w.experts.size() == 2);
  std::vector<int> experts_of(8, 0);
  for (const auto& layer : w.experts)
    for (const auto& writers : layer) {
      REQUIRE(writers.size() == 1);
      ++experts_of[writers[0]];
    }
  for (int n : experts_of) CHECK(n == 2);  // 16 experts over 8 ranks
  REQUIRE(w.dense.size() == 5);
  for (const auto& writers : w.dense) CHECK(writers.size() == 1);
  CHECK(w.dense[0] != w.dense[1]);  // the two largest on different ranks
  // spread: no rank writes more than the least-writing one plus the largest unit
  const auto [lo, hi] = std::minmax_element(w.bytes.begin(), w.bytes.end());
  CHECK(*hi - *lo <= 300);
  CHECK(std::accumulate(w.bytes.begin(), w.bytes.end(), uint64_t(0)) == 16 * 100 + 556);
}

TEST_CASE("each unit gets `copies` writers among its holders, an absent rank none, and fewer holders all write") {
  // one layer: expert 0 on ranks 0 1 2, expert 1 on ranks 2 3, expert 2 on rank 1 only, expert 3 on rank 3 only
  ExpertHolders h{{{0, 1, 2}, {2, 3}, {1}, {3}}};
  WriteRequest r{4, 2, {3}, 10, {50, 5}};
  UnitWriters w = unit_writers(h, r);
  CHECK(w.experts[0][0].size() == 2);
  for (uint32_t x : w.experts[0][0]) CHECK(named({0, 1, 2}, x));
  CHECK(w.experts[0][1] == std::vector<uint32_t>{2});  // rank 3 absent: its other holder only
  CHECK(w.experts[0][2] == std::vector<uint32_t>{1});
  CHECK(w.experts[0][3].empty());                      // held only where no one writes
  for (const auto& d : w.dense) {
    CHECK(d.size() == 2);
    CHECK_FALSE(named(d, 3));
    CHECK(std::is_sorted(d.begin(), d.end()));
  }
  CHECK(w.bytes[3] == 0);
}

TEST_CASE("experts with fewer holders are placed first, so the spread holds where holders are uneven") {
  // expert 0 on ranks 0 and 1; experts 1 and 2 on rank 0 only: rank 0 must write 1 and 2, so 0 goes to rank 1
  ExpertHolders h{{{0, 1}, {0}, {0}}};
  UnitWriters w = unit_writers(h, WriteRequest{2, 1, {}, 1, {}});
  CHECK(w.experts[0][0] == std::vector<uint32_t>{1});
  CHECK(w.experts[0][1] == std::vector<uint32_t>{0});
  CHECK(w.experts[0][2] == std::vector<uint32_t>{0});
}

TEST_CASE("a plan's writers: each expert by one of its holders, the same answer on every call") {
  Plan p;
  p.nodes = 4, p.slots = 2, p.experts = 4;
  LayerPlan l;
  l.replicas.assign(4, 2);
  for (uint32_t r = 0; r < 4; ++r) l.placement.push_back({r, (r + 1) % 4});  // expert e on ranks e and e - 1
  p.layers = {l};
  std::vector<int> count(4, 0);
  for (uint32_t r = 0; r < 4; ++r) {
    auto mine = experts_written(p, r);
    CHECK(mine == experts_written(p, r));
    for (auto [layer, e] : mine) {
      CHECK(named(l.placement[r], uint32_t(e)));  // only what it holds
      ++count[size_t(e)];
    }
    CHECK(mine.size() == 1);  // the lowest-holder rule gave rank 0 two and rank 3 none
  }
  for (int c : count) CHECK(c == 1);
}

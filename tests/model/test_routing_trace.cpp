// test_routing_trace.cpp — a recorded load trace replayed as routing (model.routing_trace): each
// step's global counts are the trace's scaled to the batch, every token gets k different experts,
// any split of the batch routes alike, the steps move through the files, and a trace that does not
// fit the model is refused naming why.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <fstream>
#include <numeric>
#include <string>

#include "model/routing_trace.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::model;

namespace {

// Every token's experts, counted, for a global batch of N routed in parts of `part` tokens.
std::vector<uint64_t> routed_counts(const RoutingTrace& t, uint64_t step, int layer, int N, int k, int part,
                                    int experts) {
  std::vector<uint64_t> c(size_t(experts), 0);
  std::vector<int32_t> idx;
  for (int first = 0; first < N; first += part) {
    const int n = std::min(part, N - first);
    idx.assign(size_t(n) * size_t(k), -1);
    t.route(step, layer, uint64_t(N), k, uint64_t(first), n, idx.data());
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < k; ++j) {
        const int32_t e = idx[size_t(i * k + j)];
        REQUIRE(e >= 0);
        REQUIRE(e < experts);
        for (int j2 = 0; j2 < j; ++j2) CHECK(idx[size_t(i * k + j2)] != e);  // k different experts
        ++c[size_t(e)];
      }
  }
  return c;
}

}  // namespace

TEST_CASE("replayed routing: the step's counts are the trace's, exactly, whatever the split") {
  // two files, two recorded layers, four experts; expert 0 hot in file 0 (above N for k = 2)
  auto t = RoutingTrace::make({{{700, 200, 100, 0}, {1, 1, 1, 1}}, {{0, 100, 200, 700}, {5, 0, 0, 5}}}, 2, 4, 3, "t");
  REQUIRE(t.ok());
  CHECK(t->files() == 2);
  CHECK(t->file_of(0) == 0);
  CHECK(t->file_of(2) == 0);
  CHECK(t->file_of(3) == 1);
  CHECK(t->file_of(6) == 0);
  const int N = 96, k = 2;
  const auto c0 = t->counts(0, 0, N, k);
  CHECK(std::accumulate(c0.begin(), c0.end(), uint64_t(0)) == uint64_t(N * k));
  CHECK(c0[0] == uint64_t(N));  // capped: a token picks an expert once
  CHECK(c0[3] == 0);            // recorded zero stays zero
  CHECK(c0[1] > c0[2]);
  for (int part : {N, 17, 1}) {
    CHECK(routed_counts(*t, 0, 0, N, k, part, 4) == c0);
    CHECK(routed_counts(*t, 4, 1, N, k, part, 4) == t->counts(4, 1, N, k));
  }
  // the same tokens route alike however the batch is split
  std::vector<int32_t> whole(size_t(N * k)), half(size_t(N * k));
  t->route(5, 0, N, k, 0, N, whole.data());
  t->route(5, 0, N, k, 0, N / 2, half.data());
  t->route(5, 0, N, k, N / 2, N / 2, half.data() + N / 2 * k);
  CHECK(whole == half);
  // layer 1 replays recorded layer 1; file 1's layer 1 has two experts only
  const auto c1 = t->counts(3, 1, N, 1);
  CHECK(c1 == std::vector<uint64_t>{48, 0, 0, 48});
}

TEST_CASE("replayed routing: a model with fewer layers takes evenly spaced recorded layers") {
  std::vector<RoutingTrace::Layers> files(1);
  for (int l = 0; l < 4; ++l) files[0].push_back({double(l == 0), double(l == 1), double(l == 2), double(l == 3)});
  auto t = RoutingTrace::make(files, 2, 4, 1, "t");
  REQUIRE(t.ok());
  CHECK(t->counts(0, 0, 10, 1) == std::vector<uint64_t>{10, 0, 0, 0});
  CHECK(t->counts(0, 1, 10, 1) == std::vector<uint64_t>{0, 0, 10, 0});
}

TEST_CASE("replayed routing: files read in iteration order, a trace that does not fit refused") {
  const std::string dir = sal::test::temp_dir("routing-trace");
  std::ofstream(dir + "/table_iter101_rank0.log") << "0:[[0.0, 9.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]\n";
  std::ofstream(dir + "/table_iter11_rank0.log") << "0:[[4.0, 0.0, 0.0, 0.0]]\n";
  auto t = RoutingTrace::load(dir, 1, 4, 1);
  REQUIRE(t.ok());
  CHECK(t->counts(0, 0, 8, 1) == std::vector<uint64_t>{8, 0, 0, 0});  // iteration 11 before 101
  CHECK(t->counts(1, 0, 8, 1) == std::vector<uint64_t>{0, 8, 0, 0});
  auto wrong = RoutingTrace::load(dir, 1, 8, 1);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message().find("4 experts per layer; model.experts is 8") != std::string::npos);
  auto nothing = RoutingTrace::load(dir + "/none", 1, 4, 1);
  REQUIRE_FALSE(nothing.ok());
}

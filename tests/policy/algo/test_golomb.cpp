// test_golomb.cpp — cyclic Golomb rulers and SPARe's shard layout: known rulers, the "at most one
// common host" property over many (N, r), and the impossible cases.
#include <doctest/doctest.h>

#include <algorithm>

#include "policy/algo/golomb.h"

using namespace sal::algo;

namespace {

// Every group hosts r distinct types, every type has r hosts, two types share at most one host.
void check_layout(const ShardLayout& layout) {
  for (const auto& stack : layout.hosted) {
    REQUIRE(int(stack.size()) == layout.redundancy);
    std::vector<int> sorted = stack;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  }
  for (const auto& hosts : hosts_of_types(layout)) CHECK(int(hosts.size()) == layout.redundancy);
  CHECK(max_common_hosts(layout) <= 1);
}

}  // namespace

TEST_CASE("small perfect difference sets are found") {
  // N = q² + q + 1 with r = q + 1 uses every non-zero residue exactly once (Singer).
  for (auto [n, r] : {std::pair{7, 3}, {13, 4}, {21, 5}, {31, 6}}) {
    auto marks = cyclic_golomb_ruler(n, r);
    REQUIRE(marks.ok());
    CHECK(marks->front() == 0);
    CHECK(int(marks->size()) == r);
    CHECK(is_cyclic_golomb_ruler(n, *marks));
  }
}

TEST_CASE("SPARe layouts never give two shard types two common hosts") {
  int found = 0;
  for (int n = 1; n <= 80; ++n) {
    for (int r = 1; r * (r - 1) <= n - 1; ++r) {
      auto layout = spare_layout(n, r, 200'000);
      // Rulers using at most half of the residues are always found quickly.
      if (2 * r * (r - 1) <= n - 1) REQUIRE(layout.ok());
      if (!layout.ok()) continue;
      ++found;
      CHECK(is_cyclic_golomb_ruler(n, layout->marks));
      check_layout(*layout);
    }
  }
  CHECK(found > 400);
}

TEST_CASE("the layout SPARe's controller runs on: N = 1000, r = 10") {
  auto layout = spare_layout(1000, 10);
  REQUIRE(layout.ok());
  check_layout(*layout);
  // Group g's stack is g + marks, in mark order.
  for (int j = 0; j < 10; ++j) CHECK(layout->hosted[7][j] == (7 + layout->marks[j]) % 1000);
}

TEST_CASE("a plain cyclic stack would share r-1 hosts: the ruler is what prevents it") {
  ShardLayout consecutive{10, 3, {0, 1, 2}, {}};
  for (int g = 0; g < 10; ++g) consecutive.hosted.push_back({g, (g + 1) % 10, (g + 2) % 10});
  CHECK(max_common_hosts(consecutive) == 2);
  CHECK_FALSE(is_cyclic_golomb_ruler(10, {0, 1, 2}));
}

TEST_CASE("impossible rulers are refused with the reason") {
  auto too_many = cyclic_golomb_ruler(10, 4);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().message() ==
        "no cyclic Golomb ruler with 4 marks modulo 10: its 12 differences exceed the 9 non-zero "
        "residues");
  // N = 2, r = 2: the differences 1 and -1 coincide modulo 2.
  CHECK_FALSE(cyclic_golomb_ruler(2, 2).ok());
  CHECK_FALSE(cyclic_golomb_ruler(0, 1).ok());
  CHECK_FALSE(cyclic_golomb_ruler(5, 0).ok());
  auto layout = spare_layout(10, 4);
  REQUIRE_FALSE(layout.ok());
  CHECK(layout.error().message().rfind("SPARe layout: ", 0) == 0);
  // A search budget too small to finish says so.
  auto budget = cyclic_golomb_ruler(31, 6, 10);
  REQUIRE_FALSE(budget.ok());
  CHECK(budget.error().message().find("within 10 search nodes") != std::string::npos);
}

TEST_CASE("a single shard per group is the trivial ruler") {
  auto layout = spare_layout(5, 1);
  REQUIRE(layout.ok());
  CHECK(layout->marks == std::vector<int>{0});
  CHECK(layout->hosted[3] == std::vector<int>{3});
  CHECK(max_common_hosts(*layout) == 0);
}

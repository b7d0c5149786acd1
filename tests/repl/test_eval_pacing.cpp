// test_eval_pacing.cpp — when a REPL chunk computes in idle time (console/eval_pacing.h): on its own
// CPU time, not the wall clock, and back to the normal class at its budget.
#include <doctest/doctest.h>

#include "console/eval_pacing.h"

#include <utility>
#include <vector>

using namespace sal::console;

namespace eval_pacing_test {

// Looks every kEvalPaceCheckMs until the budget is done; `cpu` gives the CPU time used by then.
template <class Cpu>
std::vector<std::pair<int64_t, PaceMove>> run(EvalPacing& p, Cpu cpu) {
  std::vector<std::pair<int64_t, PaceMove>> moves;
  for (int64_t t = kEvalPaceCheckMs; !p.done() && t < 100000; t += kEvalPaceCheckMs)
    if (PaceMove m = p.look(t, cpu(t)); m != PaceMove::none) moves.emplace_back(t, m);
  return moves;
}

}  // namespace eval_pacing_test

TEST_CASE("a chunk that computes goes into idle time once it used the foreground CPU time, and back at its budget") {
  EvalPacing p(1000);
  REQUIRE(p.needed());
  auto moves = eval_pacing_test::run(p, [](int64_t t) { return t; });  // a runaway: all its wall time on a CPU
  REQUIRE(moves.size() == 2);
  CHECK(moves[0] == std::make_pair(int64_t(20), PaceMove::to_idle));
  CHECK(moves[1] == std::make_pair(int64_t(1000), PaceMove::back_to_normal));
}

TEST_CASE("a chunk that waits (for the loop, or for a CPU on a busy machine) keeps its class, however long it waits") {
  // seen beside other test programs: `return job.events(500)` judged on the wall clock went into idle
  // time after 20 ms of waiting, on a machine with no idle CPU ran no more, and failed at its budget
  EvalPacing p(1200);
  auto moves = eval_pacing_test::run(p, [](int64_t t) { return t / 100; });  // 12 ms of CPU in 1.2 s
  CHECK(moves.empty());
  CHECK_FALSE(p.idle());
  CHECK(p.done());
}

TEST_CASE("a chunk starved at first, then computing, goes into idle time when its own CPU time says so") {
  EvalPacing p(1000);
  auto moves = eval_pacing_test::run(p, [](int64_t t) { return t < 500 ? int64_t(2) : t - 498; });
  REQUIRE(moves.size() == 2);
  CHECK(moves[0].first == 520);
  CHECK(moves[0].second == PaceMove::to_idle);
  CHECK(moves[1].second == PaceMove::back_to_normal);
}

TEST_CASE("a budget no longer than the foreground time needs no pacing") {
  CHECK_FALSE(EvalPacing(20).needed());
  CHECK(EvalPacing(21).needed());
}

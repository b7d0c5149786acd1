// test_steps.cpp — a step commits only when every participant voted yes; a loss aborts it.
#include <doctest/doctest.h>

#include "job/steps.h"

using namespace sal;
using namespace sal::job;
using O = StepCoordinator::Outcome;

TEST_CASE("commit needs every participant's yes, once") {
  StepCoordinator s;
  s.begin(3, {{0, 0}, {1, 0}});
  CHECK(s.vote({0, 0}, 3, 0, true, "") == O::pending);
  CHECK(s.vote({0, 0}, 3, 0, true, "") == O::ignored);  // duplicate
  CHECK(s.vote({5, 0}, 3, 0, true, "") == O::ignored);  // not a participant
  CHECK(s.vote({1, 0}, 2, 0, true, "") == O::ignored);  // stale epoch
  CHECK(s.vote({1, 0}, 3, 0, true, "") == O::committed);
  CHECK(s.committed() == 1);
  CHECK_FALSE(s.in_flight());
}

TEST_CASE("a no vote or a lost participant aborts and the step is run again") {
  StepCoordinator s;
  s.begin(1, {{0, 0}, {1, 0}});
  CHECK(s.vote({0, 0}, 1, 0, false, "nan in gradients") == O::aborted);
  CHECK(s.last_abort_reason().find("nan in gradients") != std::string::npos);
  CHECK(s.next_step() == 0);
  s.begin(2, {{0, 0}, {1, 0}});
  CHECK(s.lost(7, "unrelated") == O::ignored);
  CHECK(s.lost(1, "node 1 died") == O::aborted);
  CHECK(s.aborted() == 2);
  s.begin(3, {{0, 0}});
  CHECK(s.vote({0, 0}, 3, 0, true, "") == O::committed);
  CHECK(s.next_step() == 1);
}

// test_job_training.cpp — a job file's training spec for its workers (cli/job_training.h): the
// warm-up pass is the share of one of the fewest workers that hold every expert (experts over
// policies.slots, at most mesh.nodes) on a model of policies.slots experts, and none when
// train.warm_up is false.
#include <doctest/doctest.h>

#include "cli/job_training.h"
#include "job/config.h"

using namespace sal;

namespace {

runtime::TrainSpec spec_of(const std::string& text) {
  auto job = job::load_text(text, "t.lua", ".");
  REQUIRE_MESSAGE(job.ok(), (job.ok() ? "" : job.error().message()));
  return cli::train_spec_of(*job);
}

}  // namespace

TEST_CASE("the warm-up pass: the largest share a worker computes, on a worker's slots of experts") {
  // 16 experts on 4 slots: four workers hold them all, so a worker computes at most 64 / 4
  auto s = spec_of("return { model = { experts = 16 }, train = { batch = 64 }, mesh = { nodes = 8 }, "
                   "policies = { slots = 4 } }");
  CHECK(s.warm_up_sequences == 16);
  CHECK(s.warm_up_experts == 4);
  // 8 experts on 4 slots: two workers, half the batch (rounded up)
  s = spec_of("return { model = { experts = 8 }, train = { batch = 9 }, mesh = { nodes = 8 }, "
              "policies = { slots = 4 } }");
  CHECK(s.warm_up_sequences == 5);
  // every expert on one worker: the whole batch
  s = spec_of("return { model = { experts = 4 }, train = { batch = 8 }, mesh = { nodes = 4 }, "
              "policies = { slots = 4 } }");
  CHECK(s.warm_up_sequences == 8);
  s = spec_of("return { train = { warm_up = false } }");
  CHECK(s.warm_up_sequences == 0);
}

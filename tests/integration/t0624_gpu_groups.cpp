// t0624_gpu_groups.cpp — data-parallel groups of GPU workers through `salamander run`: eight nodes
// whose workers share cuda:0 in four groups of two (parallel.groups = 4, spare with r = 2; each
// group's data plane and the plan's are Gloo on host memory), as t0900 runs them on CPU workers. A
// worker SIGKILLed in the cross-group all-reduce of step 10 does not abort the step: the other groups
// each compute a part of the lost group's shard type on their GPU workers, the ranks left synchronise over a plane
// of their own (the gradients put back from the device's copy set aside before the first try), and
// the step commits with the fault-free run's loss, the steps after within reassociation. Labelled
// gpu: exits 77 (skipped) without a GPU. Written without a GPU (2026-11-30): its CPU twin is t0900.
// On the H200 (2026-12-04) every check passed but the log line's, which expected the wording from
// before patches spread over the groups; the line checked now is the one the same job and drill
// print on CPU workers.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

std::string write_gpu_groups_job(const std::string& dir) {
  std::string path = dir + "/gpu_groups.lua";
  std::ofstream(path) << "return {\n  name = 'gpu_groups',\n"
                      << "  model = { layers = 2, d_model = 64, heads = 4, experts = 8, top_k = 2, seq_len = 32 },\n"
                      << "  data = { path = '" << docs_dir() << "' },\n"
                      << "  train = { batch = 16, lr = 3e-3, warmup = 5, rebalance_every = 0, checkpoint_every = 0 },\n"
                      << "  parallel = { groups = 4, redundancy = 2 },\n"
                      << "  mesh = { nodes = 8, devices = 'cuda:0' },\n"
                      << "  policies = { slots = 4, redundancy = 'spare' },\n}\n";
  return path;
}

}  // namespace

TEST_CASE("t0624-gpu-groups: GPU workers in four groups patch a worker killed mid-step, no step aborts") {
  std::string dir = temp_dir("gpu-groups");
  std::string job = write_gpu_groups_job(dir);
  auto plain = run_json({bin(), "run", job, "--steps", "24", "--json", "--out", dir + "/plain"}, dir + "/plain.out",
                        300000);
  MESSAGE("fault-free: " << plain.dump());
  CHECK(plain["aborted_steps"] == 0);
  const std::string plain_logs = run_logs(dir + "/plain");
  CHECK(plain_logs.find("parameters on the device") != std::string::npos);
  CHECK(plain_logs.find("rank 7 in group 3 of 4 (ranks 6..7)") != std::string::npos);
  const auto reference = metrics_column(dir + "/plain", "loss");
  REQUIRE(reference.size() == 24);

  std::string drill = dir + "/drill.lua";
  std::ofstream(drill) << "drill{ name = 'gpu-groups', steps = 24, seed = 1 }\n"
                       << "kill{ node = 3, step = 10, during = 'allreduce' }\n";
  std::string run = dir + "/patched";
  auto j = run_json({bin(), "run", job, "--drill", drill, "--json", "--out", run}, run + ".out", 300000);
  MESSAGE("patched: " << j.dump());
  CHECK(j["steps"] == 24);
  CHECK(j["aborted_steps"] == 0);
  CHECK(j["patched_steps"] == 1);
  CHECK(j["lost_steps"] == 0);
  REQUIRE(j["recoveries"].size() >= 1);
  CHECK(j["recoveries"][0]["kind"] == "patch");
  CHECK(j["recoveries"][0]["step"] == 10);
  CHECK(run_logs(run).find("group 0 computes its part of shard types [1] too") != std::string::npos);
  auto got = metrics_column(run, "loss");
  REQUIRE(got.size() == reference.size());
  for (size_t s = 0; s < got.size(); ++s) {
    CAPTURE(s);
    CHECK(std::isfinite(got[s]));
    CHECK(std::fabs(got[s] - reference[s]) <= (s <= 10 ? 1e-5 : 5e-3) * reference[s]);
  }
  CHECK(got.back() < got.front() - 0.5);
}

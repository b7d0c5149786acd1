// t0621_gpu_sparse.cpp — GPU workers take the checkpoint schedule's sparse snapshots off the device
// (the slot's units copied on the copy stream, DeviceCompute::begin_snapshot) and put them to their
// peers' agents; losing every holder of an expert restores the whole model from those copies. Three
// nodes share cuda:0 (their data plane is Gloo on host memory); the `dense` checkpoint policy (every
// operator in full every 10 iterations: a window of one slot, nothing to replay — the CUDA model
// has no frozen operators yet). A drill kills every holder of an expert after 30 steps and adds two
// nodes: the job restores from peers (the window of iteration 20), re-executes to where it was,
// loses no step and finishes. Labelled gpu: exits 77 (skipped) without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

TEST_CASE("t0621-gpu-sparse: GPU workers' sparse snapshots restore an expert whose every holder died") {
  std::string dir = temp_dir("gpu-sparse");
  std::string job = dir + "/gpu_sparse.lua";
  std::ofstream(job) << "return {\n  name = 'gpu_sparse',\n"
                     << "  model = { layers = 2, d_model = 128, heads = 4, experts = 8, top_k = 2, seq_len = 64 },\n"
                     << "  data = { path = '" << docs_dir() << "' },\n"
                     << "  train = { batch = 16, lr = 3e-3, warmup = 5, rebalance_every = 0, checkpoint_every = 0 },\n"
                     << "  mesh = { nodes = 3, devices = 'cuda:0' },\n"
                     << "  policies = { slots = 4, min_replicas = 1, checkpoint = 'dense' },\n}\n";
  std::string drill = dir + "/drill.lua";
  std::ofstream(drill) << "drill{ name = 'gpu-sparse', steps = 60, seed = 1 }\n"
                       << "kill{ expert = 3, layer = 0, step = 30 }\nadd{ count = 2, step = 30 }\n"
                       << "expect{ lost_steps = 0, min_restores = 1, resume_s = 30 }\n";
  auto j = run_json({bin(), "run", job, "--drill", drill, "--json", "--out", dir + "/out"}, dir + "/run.out", 300000);
  MESSAGE("summary: " << j.dump());
  CHECK(j["steps"] == 60);
  CHECK(j["lost_steps"] == 0);
  REQUIRE(j["recoveries"].size() >= 1);
  CHECK(j["recoveries"][0]["source"] == "peers");
  CHECK(j["recoveries"][0]["rerun"] == 9);  // the window of iteration 20: steps 21..29 again
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  std::string logs = run_logs(dir + "/out");
  CHECK(logs.find("loaded from the sparse window 20..20 in peers' memory") != std::string::npos);
  CHECK(logs.find("parameters on the device") != std::string::npos);
  auto loss = metrics_column(dir + "/out", "loss");
  for (double l : loss) CHECK(std::isfinite(l));
  CHECK(loss.back() < loss.front() - 1.0);
  for (const auto& e : events(dir + "/out")) {
    INFO(e.kind << ": " << e.detail);
    CHECK(e.kind != "sparse_restore_failed");
    CHECK(e.kind != "slice_refused");
  }
}

// t0621_gpu_sparse.cpp — GPU workers take the checkpoint schedule's sparse snapshots off the device
// (the slot's units copied on the copy stream, DeviceCompute::begin_snapshot) and put them to their
// peers' agents; losing every holder of an expert restores the whole model from those copies. Three
// nodes share cuda:0 (their data plane is Gloo on host memory); the `dense` checkpoint policy (every
// operator in full every 10 iterations: a window of one slot, nothing to replay). A drill kills
// every holder of an expert after 30 steps and adds two nodes: the job restores from peers (the
// window of iteration 20), re-executes to where it was, loses no step and finishes. t0623: the same
// with the `quarters` policy (a window of four iterations, the operators dealt to its slots in
// turn): the window's first slot loads with the other operators frozen and the replay runs on the
// GPU (each replayed slot's units uploaded to the device, the frozen ones left out of the norm and
// the update), losing no step; its checks were run once against CPU workers (mesh.devices =
// "cpu:1", the GPU-only log line aside). Labelled gpu: exits 77 (skipped) without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// Three nodes on cuda:0 under `checkpoint` (a policy name or path); after 30 steps every holder of
// layer 0's expert 3 is killed and two nodes join. The summary; the run directory is dir/out.
nlohmann::json run_sparse_drill(const std::string& dir, const std::string& checkpoint) {
  std::string job = dir + "/gpu_sparse.lua";
  std::ofstream(job) << "return {\n  name = 'gpu_sparse',\n"
                     << "  model = { layers = 2, d_model = 128, heads = 4, experts = 8, top_k = 2, seq_len = 64 },\n"
                     << "  data = { path = '" << docs_dir() << "' },\n"
                     << "  train = { batch = 16, lr = 3e-3, warmup = 5, rebalance_every = 0, checkpoint_every = 0 },\n"
                     << "  mesh = { nodes = 3, devices = 'cuda:0' },\n"
                     << "  policies = { slots = 4, min_replicas = 1, checkpoint = '" << checkpoint << "' },\n}\n";
  std::string drill = dir + "/drill.lua";
  std::ofstream(drill) << "drill{ name = 'gpu-sparse', steps = 60, seed = 1 }\n"
                       << "kill{ expert = 3, layer = 0, step = 30 }\nadd{ count = 2, step = 30 }\n"
                       << "expect{ lost_steps = 0, min_restores = 1, resume_s = 30 }\n";
  auto j = run_json({bin(), "run", job, "--drill", drill, "--json", "--out", dir + "/out"}, dir + "/run.out", 300000);
  MESSAGE("summary: " << j.dump());
  return j;
}

// What both runs must show: every step, none lost, restored from peers, the loss falling, on the GPU.
void check_restored(const nlohmann::json& j, const std::string& dir) {
  CHECK(j["steps"] == 60);
  CHECK(j["lost_steps"] == 0);
  REQUIRE(j["recoveries"].size() >= 1);
  CHECK(j["recoveries"][0]["source"] == "peers");
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  CHECK(run_logs(dir + "/out").find("parameters on the device") != std::string::npos);
  auto loss = metrics_column(dir + "/out", "loss");
  for (double l : loss) CHECK(std::isfinite(l));
  CHECK(loss.back() < loss.front() - 1.0);
  for (const auto& e : events(dir + "/out")) {
    INFO(e.kind << ": " << e.detail);
    CHECK(e.kind != "sparse_restore_failed");
    CHECK(e.kind != "slice_refused");
  }
}

}  // namespace

TEST_CASE("t0621-gpu-sparse: GPU workers' sparse snapshots restore an expert whose every holder died") {
  std::string dir = temp_dir("gpu-sparse");
  auto j = run_sparse_drill(dir, "dense");
  check_restored(j, dir);
  CHECK(j["recoveries"][0]["rerun"] == 9);  // the window of iteration 20: steps 21..29 again
  CHECK(run_logs(dir + "/out").find("loaded from the sparse window 20..20 in peers' memory") != std::string::npos);
}

TEST_CASE("t0623-gpu-replay: GPU workers replay a four-iteration sparse window with frozen operators") {
  std::string dir = temp_dir("gpu-replay");
  auto j = run_sparse_drill(dir, std::string(SAL_SOURCE_DIR) + "/tests/policies/quarters.lua");
  check_restored(j, dir);
  const std::string logs = run_logs(dir + "/out");
  CHECK(logs.find("from the sparse window") != std::string::npos);
  CHECK(logs.find("the sparse window is replayed") != std::string::npos);  // its slots after the first
  CHECK(j["restores"] == 1);  // one restore, from peers (check_restored): not a second from disk
}

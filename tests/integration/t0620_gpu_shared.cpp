// t0620_gpu_shared.cpp — two workers sharing one GPU through the real `salamander run` path: a job
// of two nodes, each on cuda:0, so the plan has two ranks on GPU 0 and their data plane is Gloo on
// host memory (PlanDeviceExchange and PlanGradientSync, runtime/gpu_exchange.h). A small
// model (d 128, 8 experts, top-2, sequences of 64) for 60 steps, with a drill
// (tests/drills/gpu_shared.lua) that kills one node in the all-to-all of step 20 while the other
// waits in the same exchange: the run completes, the loss falls, no committed step is lost, the
// survivor (which holds every expert) resumes within 10 s, and each node really trained on the
// GPU. Labelled gpu: the program exits 77 (skipped) without a GPU (gpu_main.cpp). Its checks were
// run once against CPU workers (mesh.devices = "cpu:1") on the same job and drill.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

TEST_CASE("t0620-gpu-shared: two workers on cuda:0 train over Gloo and survive losing one") {
  std::string dir = temp_dir("gpu-shared");
  std::string job = dir + "/gpu_shared.lua";
  std::ofstream(job) << "return {\n  name = 'gpu_shared',\n"
                     << "  model = { layers = 2, d_model = 128, heads = 4, experts = 8, top_k = 2, seq_len = 64 },\n"
                     << "  data = { path = '" << docs_dir() << "' },\n"
                     << "  train = { batch = 16, lr = 3e-3, warmup = 5, rebalance_every = 0 },\n"
                     << "  mesh = { nodes = 2, devices = 'cuda:0' },\n"
                     << "  -- every expert on both workers: the survivor of the drill holds them all\n"
                     << "  policies = { slots = 8, min_replicas = 2 },\n}\n";
  std::string drill = std::string(SAL_SOURCE_DIR) + "/tests/drills/gpu_shared.lua";
  auto j = run_json({bin(), "run", job, "--drill", drill, "--json", "--out", dir + "/out"}, dir + "/run.out", 300000);
  MESSAGE("summary: " << j.dump());
  CHECK(j["steps"] == 60);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  CHECK(j["samples"] == 60 * 16);
  CHECK(j["nodes_lost"] == 1);
  REQUIRE(j["recoveries"].size() >= 1);
  for (const auto& r : j["recoveries"]) CHECK_MESSAGE(r["seconds"].get<double>() < 10.0, r.dump());
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  double first = j["first_loss"], last = j["final_loss"];
  CHECK(first > 5.0);  // ln 256 = 5.55: an untrained byte model
  CHECK(last < first - 1.0);

  // the node died where the drill meant it to, inside the exchange, and both trained on the GPU
  std::string logs = run_logs(dir + "/out");
  CHECK(logs.find("drill fault at alltoall") != std::string::npos);
  for (const char* agent : {"/out/node0.log", "/out/node1.log"}) {
    std::string log = file_text(dir + agent);
    CHECK_MESSAGE(log.find("cuda:0: ") != std::string::npos, agent);
    CHECK_MESSAGE(log.find("parameters on the device") != std::string::npos, agent);
  }

  // every committed step once, in order, with finite figures
  auto step = metrics_column(dir + "/out", "step"), loss = metrics_column(dir + "/out", "loss");
  auto norm = metrics_column(dir + "/out", "grad_norm");
  REQUIRE(step.size() == 60);
  for (size_t i = 0; i < step.size(); ++i) {
    CAPTURE(i);
    CHECK(step[i] == double(i));
    CHECK(std::isfinite(loss[i]));
    CHECK(std::isfinite(norm[i]));
    CHECK(norm[i] > 0);
  }
  // going on alone from the shared GPU's state: no jump in the loss at the recovery
  CHECK(loss[20] < loss[19] + 0.5);
  for (const auto& e : events(dir + "/out")) {
    INFO(e.kind << ": " << e.detail);
    CHECK(e.kind != "plan_failed");
  }
}

// t0630_gpu_nccl.cpp — two workers on GPUs of their own through the real `salamander run` path: one
// node with mesh.devices = "cuda:0,1", so the plan has two ranks on two GPUs, every rank's device
// key differs, and the plan gets a device data plane: the expert rows and the gradients go over
// NCCL (PlanDeviceExchange and PlanGradientSync run direct, runtime/gpu_exchange.h), the host
// values over Gloo. A small model (d 128, 8 experts, top-2) for 40 steps with a rebalance due at
// step 20 (a new plan, if the placement changes, connects a fresh NCCL communicator): the run
// completes, the loss falls, every step is committed once, and both workers connected the plane. Labelled gpu: exits 77
// (skipped) without a GPU (gpu_main.cpp); with one GPU the case says skipped (NCCL takes one rank
// per GPU).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "kernels/cuda/device.h"
#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

TEST_CASE("t0630-gpu-nccl: two workers on GPUs of their own train over NCCL") {
  const int gpus = kernels::cuda::device_count();
  if (gpus < 2) {
    MESSAGE("skipped: this machine has " << gpus << " GPU(s); the NCCL plane needs one per worker (2)");
    return;
  }
  std::string dir = temp_dir("gpu-nccl");
  std::string job = dir + "/gpu_nccl.lua";
  std::ofstream(job) << "return {\n  name = 'gpu_nccl',\n"
                     << "  model = { layers = 2, d_model = 128, heads = 4, experts = 8, top_k = 2, seq_len = 64 },\n"
                     << "  data = { path = '" << docs_dir() << "' },\n"
                     << "  train = { steps = 40, batch = 16, lr = 3e-3, warmup = 5, rebalance_every = 20 },\n"
                     << "  mesh = { nodes = 1, devices = 'cuda:0,1' },\n"
                     << "  policies = { slots = 6 },\n}\n";
  auto j = run_json({bin(), "run", job, "--json", "--out", dir + "/out"}, dir + "/run.out", 300000);
  MESSAGE("summary: " << j.dump());
  CHECK(j["steps"] == 40);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  double first = j["first_loss"], last = j["final_loss"];
  CHECK(first > 5.0);  // ln 256 = 5.55: an untrained byte model
  CHECK(last < first - 1.0);

  // both workers on their own GPU, the NCCL plane connected by each (once per plan)
  std::string log = file_text(dir + "/out/node0.log");
  MESSAGE("NCCL planes connected: " << occurrences(log, "NCCL device data plane"));
  CHECK(log.find("cuda:0: NCCL device data plane 'plan-") != std::string::npos);
  CHECK(log.find("cuda:1: NCCL device data plane 'plan-") != std::string::npos);
  CHECK(log.find("rank 0 of 2") != std::string::npos);
  CHECK(log.find("rank 1 of 2") != std::string::npos);

  auto step = metrics_column(dir + "/out", "step"), loss = metrics_column(dir + "/out", "loss");
  REQUIRE(step.size() == 40);
  for (size_t i = 0; i < step.size(); ++i) {
    CAPTURE(i);
    CHECK(step[i] == double(i));
    CHECK(std::isfinite(loss[i]));
  }
  for (const auto& e : events(dir + "/out")) {
    INFO(e.kind << ": " << e.detail);
    CHECK(e.kind != "plan_failed");
  }
}

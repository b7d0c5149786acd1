// t0622_gpu_llama.cpp — the moe-llama family on GPU workers through the real `salamander run` path:
// two workers sharing cuda:0 (their plan's data plane Gloo on host memory, the routed experts' SwiGLU
// MLPs through PlanDeviceExchange), a model with every option the GPU builds (grouped-query
// attention with QK-norm, attention biases, a gated shared expert, a sigmoid router with
// renormalised top-2, a z-loss, an untied head), and t0620's drill: one node killed in the
// all-to-all of step 20 while the other waits in the same exchange. The run completes, the loss
// falls, no committed step is lost, and both workers trained on the GPU. Labelled gpu: the program
// exits 77 (skipped) without a GPU (gpu_main.cpp). Its checks were run once against CPU workers
// (mesh.devices = "cpu:1", the GPU-only log lines aside) on the same job and drill.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

TEST_CASE("t0622-gpu-llama: two workers on cuda:0 train moe-llama over Gloo and survive losing one") {
  std::string dir = temp_dir("gpu-llama");
  std::string job = dir + "/gpu_llama.lua";
  std::ofstream(job) << "return {\n  name = 'gpu_llama',\n"
                     << "  model = { kind = 'moe-llama', layers = 2, d_model = 128, heads = 4, kv_heads = 2,\n"
                     << "            qk_norm = true, attn_bias = true, shared_experts = 1, shared_gate = true,\n"
                     << "            router = 'sigmoid', norm_topk = true, z_loss_weight = 0.001, tied_head = false,\n"
                     << "            experts = 8, top_k = 2, seq_len = 64 },\n"
                     << "  data = { path = '" << docs_dir() << "' },\n"
                     << "  train = { batch = 16, lr = 3e-3, warmup = 5, rebalance_every = 0 },\n"
                     << "  mesh = { nodes = 2, devices = 'cuda:0' },\n"
                     << "  policies = { slots = 8, min_replicas = 2 },\n}\n";
  std::string drill = std::string(SAL_SOURCE_DIR) + "/tests/drills/gpu_shared.lua";
  auto j = run_json({bin(), "run", job, "--drill", drill, "--json", "--out", dir + "/out"}, dir + "/run.out", 300000);
  MESSAGE("summary: " << j.dump());
  CHECK(j["steps"] == 60);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  CHECK(j["samples"] == 60 * 16);
  CHECK(j["nodes_lost"] == 1);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  double first = j["first_loss"], last = j["final_loss"];
  CHECK(first > 5.0);  // ln 256 = 5.55: an untrained byte model
  CHECK(last < first - 1.0);

  std::string logs = run_logs(dir + "/out");
  CHECK(logs.find("drill fault at alltoall") != std::string::npos);
  for (const char* agent : {"/out/node0.log", "/out/node1.log"}) {
    std::string log = file_text(dir + agent);
    CHECK_MESSAGE(log.find("parameters on the device") != std::string::npos, agent);
  }
  auto step = metrics_column(dir + "/out", "step"), loss = metrics_column(dir + "/out", "loss");
  REQUIRE(step.size() == 60);
  for (size_t i = 0; i < step.size(); ++i) {
    CAPTURE(i);
    CHECK(step[i] == double(i));
    CHECK(std::isfinite(loss[i]));
  }
  CHECK(loss[20] < loss[19] + 0.5);
  for (const auto& e : events(dir + "/out")) {
    INFO(e.kind << ": " << e.detail);
    CHECK(e.kind != "plan_failed");
  }
}

// t0560_llama.cpp — the moe-llama family through the resilience features with real processes, on
// real text tokenised as a user would: `salamander data prepare` trains a sentencepiece vocabulary
// of 500 on docs/ and writes the ids; the model has grouped-query attention, a shared expert, a
// sigmoid router with renormalised top-k and an untied head, on six nodes. Every holder of an
// expert is killed: their new holders rebuild the lost SwiGLU experts from the window of sparse
// snapshots in peers' memory and the upstream logs (nobody rolls back), no committed step is lost,
// and the weights end as a fault-free run's bit for bit; the validation loss falls. One node lost
// every ten steps until half are gone (with OLMoE's QK-norm and Qwen2-MoE's attention biases and
// gated shared expert): no step lost, no restore. With
// DeepSeek-V3's routing bias: the lost expert restored by replaying the window (gates frozen,
// biases in their weights) bit for bit, and three data-parallel groups patching three losses with
// every rank's bias alike.
#include <doctest/doctest.h>

#include <fstream>

#include "ckpt/format.h"
#include "support/mesh_harness.h"
#include "support/proc.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// health = 'ignore': runs compared bit for bit need the same decisions (t0550 says why).
// docs/ as ids of a sentencepiece vocabulary of 500 trained on it.
std::string prepare_docs(const std::string& dir) {
  const std::string out = dir + "/docs.u16";
  Proc p = spawn({bin(), "data", "prepare", SAL_SOURCE_DIR "/docs", "--train-vocab", "500", "--out", out},
                 dir + "/prepare.out");
  REQUIRE_MESSAGE(p.wait(120000) == 0, p.output());
  return out;
}

std::string write_llama_job(const std::string& dir, int nodes, const std::string& mesh = "", const std::string& train = "",
                            const std::string& model = "") {
  const std::string tokens = prepare_docs(dir);
  std::string path = dir + "/llama.lua";
  std::ofstream(path)
      << "return {\n  name = 'llama',\n"
      << "  model = { kind = 'moe-llama', layers = 2, d_model = 32, heads = 4, kv_heads = 2, experts = 8, top_k = 2,\n"
      << "            expert_ffn = 32, shared_experts = 1, router = 'sigmoid', norm_topk = true, z_loss_weight = 0.001,\n"
      << "            tied_head = false, seq_len = 16, vocab = 500" << model << " },\n"
      << "  data = { path = '" << tokens << "', format = 'uint16', tokenizer = '" << tokens << ".model', validation = 0.1 },\n"
      << "  train = { batch = 8, lr = 1e-2, warmup = 5, rebalance_every = 0, checkpoint_every = 0, eval_every = 10" << train << " },\n"
      << "  mesh = { nodes = " << nodes << mesh << " },\n"
      << "  policies = { slots = 4, checkpoint = '" SAL_SOURCE_DIR "/tests/policies/quarters.lua', health = 'ignore' },\n}\n";
  return path;
}

std::string test_drill(const std::string& name) { return std::string(SAL_SOURCE_DIR) + "/tests/drills/" + name; }

// The lose_expert_peers drill on `job` and a fault-free run of it: 130 steps, one restore, no step
// lost, every expectation met, and the weights equal bit for bit. The drill run's summary.
nlohmann::json lose_expert_bit_for_bit(const std::string& dir, const std::string& job) {
  auto j = run_json({bin(), "run", job, "--drill", test_drill("lose_expert_peers.lua"), "--json", "--out", dir + "/run"},
                    dir + "/run.out", 180000);
  run_json({bin(), "run", job, "--steps", "130", "--json", "--out", dir + "/plain"}, dir + "/plain.out", 120000);
  CHECK(j["steps"] == 130);
  CHECK(j["restores"] == 1);
  CHECK(j["lost_steps"] == 0);
  REQUIRE(j["recoveries"].size() == 1);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  auto d = weight_distance(dir + "/plain/checkpoint", dir + "/run/checkpoint");
  CHECK(d.units == 1 + 2 * (2 + 8));
  CHECK(d.elementwise == 0);
  return j;
}

// DeepSeek-V3's balancing alone (no balancing loss): the gates carry a routing bias.
const char* kBiasModel = ", aux_loss_weight = 0, bias_update = 0.01";

// The routing bias of every gate in a checkpoint: how far it moved from 0 (the largest |bias|).
double largest_bias(const std::string& checkpoint) {
  auto params = ckpt::load_all(checkpoint);
  REQUIRE_MESSAGE(params.ok(), params.error().message());
  REQUIRE(params->dims.router_bias);
  const Slice b = gate_layout(params->dims).bias;
  double most = 0;
  for (const model::Unit& g : params->gate)
    for (size_t i = b.offset; i < b.offset + b.size; ++i) most = std::max(most, double(std::fabs(g.w[i])));
  return most;
}

size_t count_events(const std::string& run, const std::string& kind) {
  size_t n = 0;
  for (const auto& e : events(run)) n += e.kind == kind;
  return n;
}

}  // namespace

TEST_CASE("t0560-llama-lose-expert: every holder of a moe-llama expert killed, rebuilt from peers' memory and the upstream logs, 0 steps lost, the weights a fault-free run's bit for bit") {
  std::string dir = temp_dir("llama");
  std::string job = write_llama_job(dir, 6, ", join_batch_ms = 600000", ", expert_logs = true");
  auto j = lose_expert_bit_for_bit(dir, job);
  CHECK(j["recoveries"][0]["source"] == "logs");  // the SwiGLU experts rebuilt alone
  CHECK(j["recoveries"][0]["rerun"] == 0);
  auto val = validation_losses(dir + "/run");
  REQUIRE(val.size() == 13);  // steps 0, 10, ..., 120
  CHECK(val.at(120) < val.at(0) - 0.5);
}

TEST_CASE("t0561-llama-one-every-n: a moe-llama job (with QK-norm, attention biases and a gated shared expert) loses a node every ten steps until half are gone, with no step lost and no restore") {
  std::string dir = temp_dir("llama");
  std::string job = write_llama_job(dir, 6, "", "", ", qk_norm = true, attn_bias = true, shared_gate = true");
  auto j = run_json({bin(), "run", job, "--drill", SAL_SOURCE_DIR "/scripts/drills/one_every_n.lua", "--drill-arg",
                     "every=10,nodes=6", "--json", "--out", dir + "/run"},
                    dir + "/run.out", 180000);
  CHECK(j["steps"] == 40);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  CHECK(metrics_column(dir + "/run", "workers").back() == 3);
}

TEST_CASE("t0562-llama-routing-bias: DeepSeek-V3's balancing through a lost expert: the sparse rung replays the window with frozen gates, 0 steps lost, the weights and the routing bias a fault-free run's bit for bit") {
  std::string dir = temp_dir("llama");
  std::string job = write_llama_job(dir, 6, ", join_batch_ms = 600000", "", kBiasModel);
  auto j = lose_expert_bit_for_bit(dir, job);
  CHECK(j["recoveries"][0]["source"] != "logs");  // no upstream logs: the window replayed, gates frozen in it
  CHECK(count_events(dir + "/run", "unit_corrupt") == 0);  // every rank's gates (and biases) agreed at every step
  CHECK(largest_bias(dir + "/run/checkpoint") >= 0.05);  // it moved: at least five steps' worth
}

TEST_CASE("t0563-llama-routing-bias-groups: with data-parallel groups each group's loads add up to the batch's, so every rank moves the bias alike, through a lost node") {
  std::string dir = temp_dir("llama");
  std::string job = write_llama_job(dir, 6, "", ", eval_every = 0", kBiasModel);
  auto j = run_json({bin(), "run", job, "--set", "parallel.groups=3,parallel.redundancy=2,policies.redundancy=spare,policies.slots=16", "--drill", SAL_SOURCE_DIR "/scripts/drills/one_every_n.lua",
                     "--drill-arg", "every=15,nodes=6,during=backward", "--json", "--out", dir + "/run"},
                    dir + "/run.out", 180000);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["patched_steps"] == 3);  // each loss mid-backward: the other groups computed its shard types
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  CHECK(count_events(dir + "/run", "unit_corrupt") == 0);  // a rank whose bias had drifted would disagree here
  CHECK(largest_bias(dir + "/run/checkpoint") >= 0.05);
}

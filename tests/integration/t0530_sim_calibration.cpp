// t0530_sim_calibration.cpp — the simulator calibrated against a real run: a drill kills two of
// five nodes and adds one back over 24 s of training; `salamander sim fit` turns the run into a
// scenario (its membership replayed as faults, its step times fitted per live-worker count, its
// measured recovery costs, its training time as the horizon), and `salamander sim` on that
// scenario predicts the samples the run trained within 10 %.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// Steps of about 0.1 s on 2 cores: compute enough that what each worker more costs an
// oversubscribed CPU stays small beside it. (A tinier model's step time grows faster than linearly
// with the workers, which the step model's non-negative terms cannot follow.)
std::string write_calibration_job(const std::string& dir) {
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'calibration',\n"
                      << "  model = { layers = 1, d_model = 128, heads = 4, experts = 8, top_k = 2, seq_len = 64 },\n"
                      << "  data = { path = '" << docs_dir() << "' },\n"
                      << "  train = { steps = 1000000, batch = 16, lr = 1e-2, warmup = 5, rebalance_every = 0,"
                      << " checkpoint_every = 50 },\n"
                      << "  mesh = { nodes = 5 },\n  policies = { slots = 4 },\n}\n";
  return path;
}

// Five nodes, four, three, then four again: the step time is measured at three worker counts.
constexpr int kKills = 2;
std::string write_drill(const std::string& dir) {
  std::string path = dir + "/drill.lua";
  std::ofstream(path) << "drill{ name = 'calibration', duration_s = 24, seed = 7 }\n"
                      << "kill{ node = 'random', at_s = 6 }\n"
                      << "kill{ node = 'random', at_s = 12 }\n"
                      << "add{ count = 1, at_s = 16 }\n"
                      << "expect{ lost_steps = 0, restores = 0 }\n";
  return path;
}

// Runs a command that prints one JSON object on its last line; REQUIREs exit code 0.
nlohmann::json command_json(const std::vector<std::string>& args, const std::string& log) {
  Proc p = spawn(args, log);
  int rc = p.wait(60000);
  std::string out = p.output();
  INFO(out);
  REQUIRE(rc == 0);
  auto at = out.rfind("\n{");
  at = at == std::string::npos ? 0 : at + 1;
  REQUIRE(out.compare(at, 1, "{") == 0);
  return nlohmann::json::parse(out.substr(at, out.find('\n', at) - at));
}

}  // namespace

TEST_CASE("t0530-sim-calibration: a scenario fitted from a drilled run predicts its samples within 10 %") {
  std::string dir = temp_dir("calibration");
  std::string run = dir + "/run";
  auto j = run_json({bin(), "run", write_calibration_job(dir), "--drill", write_drill(dir), "--json", "--out", run},
                    dir + "/run.out", 90000);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  int dead = 0;
  for (const auto& e : events(run)) dead += e.kind == "node_dead";
  REQUIRE(dead == kKills);

  auto fit = command_json({bin(), "sim", "fit", run, "-o", dir + "/fit.lua", "--json"}, dir + "/fit.out");
  CHECK(fit["scenario_path"] == dir + "/fit.lua");
  CHECK(fit["actual_samples"] == j["samples"]);
  CHECK(fit["deaths"] == kKills);
  CHECK(fit["faults"] == kKills);  // the added node comes back in a dead one's place
  CHECK(fit["joins"] == 1);
  CHECK(fit["nodes"] == 5);
  std::string text = file_text(dir + "/fit.lua");
  size_t faults = 0;
  for (size_t at = text.find("at_s = "); at != std::string::npos; at = text.find("at_s = ", at + 1)) ++faults;
  CHECK(faults == kKills);

  auto sim = command_json({bin(), "sim", dir + "/fit.lua", "--json"}, dir + "/sim.out");
  const auto& s = sim["points"][0]["strategies"][0];
  double predicted = s["samples"]["mean"].get<double>(), actual = fit["actual_samples"].get<double>();
  double error = std::abs(predicted - actual) / actual;
  MESSAGE("calibration: run " << run << ": " << actual << " samples in " << fit["horizon_s"].get<double>()
                              << " s; simulated " << predicted << " (error " << 100 * error << " %); fit "
                              << fit["fixed_s"].get<double>() << " + " << fit["per_gpu_s"].get<double>() << "*G + "
                              << fit["dense_s_per_token"].get<double>() << "*" << fit["tokens_per_step"].get<double>()
                              << "/G, R^2 " << fit["r2"].get<double>() << ", per G " << fit["per_workers"].dump()
                              << "; rebuild " << fit["rebuild_s"].get<double>() << " s");
  CHECK(s["failures"]["mean"].get<double>() == kKills);
  CHECK(error <= 0.10);
}

// t0600_gpu_run.cpp — a GPU job through the real `salamander run` path (controller, agent, one
// worker on cuda:0, plans, commit votes, metrics, snapshots and the final checkpoint): the shipped
// scripts/jobs/gpu_quickstart.lua for 120 steps, with a snapshot every 40 steps. Its loss falls well below its start, every step
// reports the whole batch's tokens, a re-plan at step 100 (the GPU's state downloaded and uploaded
// again) does not disturb training, the expert counts reach the planner, and the checkpoint it
// writes holds every unit, trained. Labelled gpu: the program exits 77 (skipped) without a GPU
// (gpu_main.cpp). Its checks were run once against a CPU worker on a narrower copy of the job.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/format.h"
#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// The job file with its data where this machine has it: the fortunes package, else the carried
// .deb's copy on a lent GPU machine (scripts/gpu/build.sh unpacks it into /tmp/deps), else the
// repository's docs/ (real English text that is always there).
std::string write_gpu_job(const std::string& dir) {
  std::string text = file_text(std::string(SAL_SOURCE_DIR) + "/scripts/jobs/gpu_quickstart.lua");
  const std::string fortunes = "/usr/share/games/fortunes";
  std::string data = fortunes;
  if (!std::filesystem::exists(fortunes))
    data = std::filesystem::exists("/tmp/deps" + fortunes) ? "/tmp/deps" + fortunes : docs_dir();
  auto at = text.find('"' + fortunes + '"');  // data.path's value, not the comment that names the path
  REQUIRE(at != std::string::npos);
  text.replace(at + 1, fortunes.size(), data);
  // A snapshot every 40 steps rather than the job's 100: on an H200 a step takes about 25 ms, and a
  // snapshot started at step 100 of 120 (1.9 GB to disk) is still being written when the run ends.
  const std::string every = "checkpoint_every = 100";
  auto ce = text.find(every);
  REQUIRE(ce != std::string::npos);
  text.replace(ce, every.size(), "checkpoint_every = 40");
  std::string path = dir + "/gpu_quickstart.lua";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("t0600-gpu-run-learns: one worker on cuda:0 trains the GPU job through salamander run") {
  std::string dir = temp_dir("gpu");
  std::string job = write_gpu_job(dir);
  const int steps = 120;
  auto j = run_json({bin(), "run", job, "--steps", std::to_string(steps), "--json", "--out", dir + "/out"},
                    dir + "/run.out", 400000);
  MESSAGE("summary: " << j.dump());
  CHECK(j["job"] == "gpu_quickstart");
  CHECK(j["steps"] == steps);
  CHECK(j["aborted_steps"] == 0);
  CHECK(j["restores"] == 0);
  double first = j["first_loss"], last = j["final_loss"];
  CHECK(first > 5.0);  // ln 256 = 5.55: an untrained byte model
  CHECK(first < 6.5);
  CHECK(last < first - 1.5);
  CHECK(j["tokens_per_s"].get<double>() > 0);

  // every step committed once, in order, with the whole batch's tokens and finite figures
  auto step = metrics_column(dir + "/out", "step"), loss = metrics_column(dir + "/out", "loss");
  auto tokens = metrics_column(dir + "/out", "tokens"), norm = metrics_column(dir + "/out", "grad_norm");
  REQUIRE(step.size() == size_t(steps));
  for (size_t i = 0; i < step.size(); ++i) {
    CAPTURE(i);
    CHECK(step[i] == double(i));
    CHECK(std::isfinite(loss[i]));
    CHECK(tokens[i] == 32 * 256);
    CHECK(std::isfinite(norm[i]));
    CHECK(norm[i] > 0);
  }
  // the re-plan at step 100 reloaded the GPU without a jump in the loss
  CHECK(loss[100] < loss[99] + 0.5);

  int plans = 0, exited = 0, snapshots = 0, checkpoints = 0;
  for (const auto& e : events(dir + "/out")) {
    INFO(e.kind << ": " << e.detail);
    if (e.kind == "plan_applied") ++plans;
    if (e.kind == "snapshot_saved") ++snapshots;
    if (e.kind == "checkpoint_saved") ++checkpoints;
    if (e.kind == "worker_exited") {
      ++exited;
      CHECK(e.detail.find("exited with code 0") != std::string::npos);
    }
    CHECK(e.kind != "plan_failed");
    CHECK(e.kind != "snapshot_failed");
  }
  CHECK(plans >= 2);

  // the expert counts the votes carried: the re-plan's mean loads, per layer, add up to every
  // token's top-2 assignments
  int with_loads = 0;
  std::istringstream plan_lines(file_text(dir + "/out/plans.jsonl"));
  for (std::string line; std::getline(plan_lines, line);) {
    auto plan = nlohmann::json::parse(line);
    if (plan["loads"].empty()) continue;
    ++with_loads;
    REQUIRE(plan["loads"].size() == 4);
    for (const auto& layer : plan["loads"]) {
      REQUIRE(layer.size() == 8);
      double sum = 0;
      for (const auto& x : layer) sum += x.get<double>();
      CHECK(std::abs(sum - 32 * 256 * 2) < 1.0);
    }
  }
  CHECK(with_loads >= 1);
  CHECK(snapshots >= 1);
  CHECK(checkpoints == 1);
  CHECK(exited == 1);

  // the checkpoint holds every unit (embedding, 4 x dense and gate, 4 x 8 experts), trained away
  // from its initial weights and finite
  auto p = ckpt::load_all(dir + "/out/checkpoint");
  REQUIRE(p.ok());
  auto units = p->units();
  CHECK(units.size() == 1 + 2 * 4 + 4 * 8);
  for (model::Unit* u : units) {
    CAPTURE(u->id.name());
    model::Unit init = model::make_unit(p->dims, u->id, 1);
    REQUIRE(init.w.size() == u->w.size());
    double moved = 0;
    bool finite = true;
    for (size_t i = 0; i < u->w.size(); ++i) {
      finite = finite && std::isfinite(u->w[i]) && std::isfinite(u->m[i]) && std::isfinite(u->v[i]);
      moved = std::max(moved, double(std::abs(u->w[i] - init.w[i])));
    }
    CHECK(finite);
    CHECK(moved > 1e-4);
  }
  // a warm GPU machine runs this again: leave no gigabytes behind
  std::filesystem::remove_all(dir + "/out/snapshots");
  std::filesystem::remove_all(dir + "/out/checkpoint");
}

// t1001_corrupt.cpp — catching corruption on a real mesh (docs/health.md): a drill's corrupt{}
// flips bits of one worker's copy of a replicated expert, and of a non-expert unit, as step 10
// begins. The holders' digests disagree at that very step; it is aborted before it commits, the
// odd copy is repaired from the majority's (a transfer in the same plan made again), the step runs
// again; no committed step is lost, nothing is restored, and the final checkpoint equals a
// fault-free run's bit for bit. The same drill with the digests off (train.digest_every = 0)
// must end with other weights: the corruption is real, and the comparison can tell.
#include <doctest/doctest.h>

#include <fstream>

#include "ckpt/format.h"
#include "core/model_shape.h"
#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// 4 workers x 3 slots for 4 experts of each layer: every expert on 3 of the 4 workers (the first
// plan puts layer 0's expert 0 on node 1), every non-expert unit on all 4. The health policy is
// lockstep (`ignore`): runs compared bit for bit must not give a worker starved by the machine's
// other load less of the batch in one run and not the other.
std::string corrupt_job(const std::string& dir, const std::string& extra = "", int replicas = 3) {
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'corrupt',\n"
                      << "  model = { layers = 2, d_model = 32, heads = 2, experts = 4, top_k = 2, seq_len = 32 },\n"
                      << "  data = { path = '" << docs_dir() << "' },\n"
                      << "  train = { batch = 8, lr = 1e-2, warmup = 5, rebalance_every = 0, checkpoint_every = 0" << extra
                      << " },\n"
                      << "  mesh = { nodes = 4 },\n  policies = { slots = " << replicas << ", min_replicas = " << replicas
                      << ", health = 'ignore' },\n"
                      << "  faults = { inject = true },\n}\n";
  return path;
}

nlohmann::json train(const std::string& job, const std::string& run, const std::vector<std::string>& drill_args,
                     int rc = 0) {
  std::vector<std::string> args{bin(), "run", job, "--json", "--out", run};
  if (drill_args.empty()) {
    args.insert(args.end(), {"--steps", "30"});
  } else {
    args.insert(args.end(), {"--drill", std::string(SAL_SOURCE_DIR) + "/tests/drills/corrupt_unit.lua"});
    for (const auto& a : drill_args) args.insert(args.end(), {"--drill-arg", a});
  }
  return run_json(args, run + ".out", 120000, rc);
}

// The units whose final checkpoint files differ between two runs, byte for byte (weights and both
// moments, as written: a NaN compares as its bits).
std::vector<std::string> units_differing(const std::string& run_a, const std::string& run_b, const ModelShape& shape) {
  std::vector<std::string> out;
  for (const UnitId& id : model_units(shape)) {
    const std::string a = file_text(ckpt::unit_file(run_a + "/checkpoint", id));
    const std::string b = file_text(ckpt::unit_file(run_b + "/checkpoint", id));
    if (a != b || a.empty()) out.push_back(id.name());
  }
  return out;
}

const ModelShape kShape{2, 32, 4, 32, 256};

// A drill run that corrupts `unit` on `node`: detected at step 10, repaired, nothing lost.
void check_repaired(const nlohmann::json& j, const std::string& run, const std::string& unit, const std::string& node) {
  CHECK(j["exit_code"] == 0);
  CHECK(j["steps"] == 30);
  CHECK(j["lost_steps"] == 0);
  CHECK(j["restores"] == 0);
  for (const auto& e : j["expectations"]) CHECK_MESSAGE(e["ok"].get<bool>(), e.dump());
  INFO(file_text(run + "/events.csv"));
  int corrupt = 0, repaired = 0, aborted = 0;
  for (const auto& e : events(run)) {
    if (e.kind == "unit_corrupt") {
      ++corrupt;
      CHECK(e.detail.find("step 10: " + unit + ": worker " + node + ".0 disagrees with the") == 0);
    }
    repaired += e.kind == "repaired";
    aborted += e.kind == "step_aborted";
  }
  CHECK(corrupt == 1);
  CHECK(repaired == 1);
  CHECK(aborted == 1);
  auto steps = metrics_column(run, "step");  // every committed step once, in order
  REQUIRE(steps.size() == 30);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == double(i));
}

}  // namespace

TEST_CASE("t1001-corrupt: flipped bits in a replicated expert and in a non-expert unit are caught at the next step, repaired, nothing lost, the weights a fault-free run's bit for bit") {
  std::string dir = temp_dir("corrupt");
  std::string job = corrupt_job(dir);
  train(job, dir + "/clean", {});
  SUBCASE("a replicated expert") {
    auto j = train(job, dir + "/expert", {"node=1", "unit=layer0.expert0", "bits=3"});
    check_repaired(j, dir + "/expert", "layer0.expert0", "1");
    CHECK(units_differing(dir + "/clean", dir + "/expert", kShape).empty());
  }
  SUBCASE("a non-expert unit") {
    auto j = train(job, dir + "/dense", {"node=3", "unit=layer1.dense", "bits=5"});
    check_repaired(j, dir + "/dense", "layer1.dense", "3");
    CHECK(units_differing(dir + "/clean", dir + "/dense", kShape).empty());
  }
}

TEST_CASE("t1002-corrupt-unseen: without digests the same corruption goes into the committed weights") {
  std::string dir = temp_dir("corrupt-off");
  train(corrupt_job(dir), dir + "/clean", {});
  auto j = train(corrupt_job(dir, ", digest_every = 0"), dir + "/off", {"node=3", "unit=layer1.dense", "bits=5"});
  CHECK(j["lost_steps"] == 0);
  for (const auto& e : events(dir + "/off")) CHECK(e.kind != "unit_corrupt");
  CHECK(units_differing(dir + "/clean", dir + "/off", kShape).size() == model_units(kShape).size());
}

TEST_CASE("t1003-corrupt-refused: a job that does not allow fault injection refuses the drill, naming the field") {
  std::string dir = temp_dir("corrupt-refused");
  std::string job = corrupt_job(dir);
  std::string text = file_text(job);
  text.replace(text.find("  faults = { inject = true },\n"), 30, "");
  std::ofstream(job) << text;
  Proc p = spawn({bin(), "run", job, "--drill", std::string(SAL_SOURCE_DIR) + "/tests/drills/corrupt_unit.lua", "--out",
                  dir + "/run"},
                 dir + "/run.out");
  CHECK(p.wait(60000) != 0);
  INFO(p.output());
  CHECK(p.output().find("corrupt_unit.lua:6: corrupt{} is a fault injector, and the job " + job +
                        " does not allow fault injection: faults.inject is false") != std::string::npos);
}

TEST_CASE("t1004-corrupt-no-majority: an expert's two holders disagree and no copy can be told good: the model is restored, and its weights end a fault-free run's bit for bit") {
  std::string dir = temp_dir("corrupt-two");
  std::string job = corrupt_job(dir, "", 2);  // 4 workers x 2 slots: every expert on 2 of them
  train(job, dir + "/clean", {});
  // step 15: a window of sparse snapshots is complete in the agents' memory by then. Which rung
  // restores is not asserted: the window the controller picks is at times one the agents have
  // already replaced (docs/health.md), and the restore then falls to the seed (15 steps again).
  auto j = train(job, dir + "/two", {"node=1", "unit=layer0.expert0", "bits=3", "at=15", "restores=1", "lost=15"});
  CHECK(j["exit_code"] == 0);
  CHECK(j["steps"] == 30);
  CHECK(j["restores"] == 1);
  REQUIRE(j["recoveries"].size() == 1);
  MESSAGE("restored from " << j["recoveries"][0]["source"] << ", " << j["lost_steps"] << " committed steps run again");
  INFO(file_text(dir + "/two/events.csv"));
  bool said = false;
  for (const auto& e : events(dir + "/two"))
    said = said || (e.kind == "unit_corrupt" && e.detail.find("step 15: layer0.expert0: its 2 holders") == 0 &&
                    e.detail.find("no copy can be told good: the model is restored") != std::string::npos);
  CHECK(said);
  CHECK(units_differing(dir + "/clean", dir + "/two", kShape).empty());
}

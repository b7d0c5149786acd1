// t0300_run.cpp — `salamander run`: it drives its steps and exits 0; Ctrl-C and job.stop() shut
// the local mesh down cleanly; SIGKILL of the run takes agents and workers with it; no process
// outlives the run in any of these ends. Plus steps keep committing through a node loss, a stop
// writes the final checkpoint, and a run resumed from its checkpoint ends as the uninterrupted run
// does, bit for bit. `--steps` is the job's length, its learning-rate schedule's included; `--resume`
// trains the job its run directory recorded, and a job that differs from it is refused, key by key,
// unless --resume-anyway. A local mesh too small to hold every expert is refused before it starts.
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "model/optimizer.h"

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// A run with its REPL on an ipc endpoint the test chose, idle (no steps) until stopped — or
// training `steps` steps of the default job.
struct IdleRun {
  explicit IdleRun(int64_t steps = 0)
      : proc(spawn({bin(), "run", "--steps", std::to_string(steps), "--nodes", "3", "--repl", repl, "--out", dir + "/out"},
                   dir + "/run.out")) {}
  std::string dir = temp_dir("run");
  std::string repl = "ipc://" + dir + "/repl.sock";
  Proc proc;
  std::unique_ptr<repl::Client> client;

  // The steps committed so far (job.status()).
  int64_t committed() {
    auto r = client->eval("return job.status()", wire::ValueFormat::json);
    if (!r.ok() || !r->ok) return -1;
    return nlohmann::json::parse(r->value)[0]["step"].get<int64_t>();
  }

  // Waits for 3 ready workers; returns the pids of every agent and worker.
  std::set<pid_t> wait_ready() {
    REQUIRE(proc.wait_for_line("repl  ", 5000) == repl);
    client = std::make_unique<repl::Client>(repl::ClientOptions{repl});
    REQUIRE(client->connect().ok());
    std::set<pid_t> pids;
    bool ready = eventually([&] {
      auto r = client->eval("return job.nodes()", wire::ValueFormat::json);
      if (!r.ok() || !r->ok) return false;
      auto nodes = nlohmann::json::parse(r->value)[0];
      pids.clear();
      int ready_workers = 0;
      for (auto& n : nodes) {
        pids.insert(n["pid"].get<pid_t>());
        for (auto& w : n["workers"]) {
          pids.insert(w["pid"].get<pid_t>());
          ready_workers += w["state"] == "ready";
        }
      }
      return ready_workers == 3;
    }, 10000, 20);
    REQUIRE(ready);
    REQUIRE(pids.size() == 6);
    return pids;
  }
};

bool all_gone(const std::set<pid_t>& pids) {
  for (pid_t p : pids)
    if (pid_alive(p)) return false;
  return true;
}

}  // namespace

TEST_CASE("t0300-run: salamander run commits every step, then exits 0 with a JSON summary") {
  std::string dir = temp_dir("run");
  Proc run = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "120", "--json", "--out", dir + "/out"},
                   dir + "/run.out");
  REQUIRE(run.wait(30000) == 0);
  std::string out = run.output();
  CHECK(out.rfind("repl  tcp://127.0.0.1:", 0) == 0);  // the REPL endpoint is printed first
  auto last = out.substr(out.rfind("{\"job\""));
  auto j = nlohmann::json::parse(last);
  CHECK(j["job"] == "tiny");
  CHECK(j["steps"] == 120);
  CHECK(j["final_loss"].get<double>() < j["first_loss"].get<double>());
  CHECK(j["tokens_per_s"].get<double>() > 0);
  CHECK(j["checkpoint"] == dir + "/out/checkpoint");
  CHECK(j["nodes_joined"] == 4);
  CHECK(j["nodes_lost"] == 0);
  CHECK(j["exit_code"] == 0);
  auto events = Proc(-1, dir + "/out/events.csv").output();
  CHECK(events.find("steps_done") != std::string::npos);
  CHECK(events.find("node_joined") != std::string::npos);
}

TEST_CASE("t0301-run-sigint: Ctrl-C stops the local mesh cleanly and leaves no process behind") {
  IdleRun r;
  auto pids = r.wait_ready();
  r.proc.signal(SIGINT);
  CHECK(r.proc.wait(8000) == 130);
  CHECK(eventually([&] { return all_gone(pids); }, 3000));
  std::string out = r.proc.output();
  CHECK(out.find("interrupted (Ctrl-C)") != std::string::npos);
  CHECK(out.find("0 lost") != std::string::npos);  // agents left cleanly: none was declared dead
}

TEST_CASE("t0307-stop-saves: Ctrl-C or job.stop() aborts the step in flight and writes the final checkpoint") {
  for (bool by_signal : {true, false}) {
    CAPTURE(by_signal);
    IdleRun r(1000000);
    auto pids = r.wait_ready();
    REQUIRE(eventually([&] { return r.committed() >= 5; }, 20000, 20));
    if (by_signal) {
      r.proc.signal(SIGINT);
    } else {
      auto res = r.client->eval("job.stop()");
      REQUIRE(res.ok());
      CHECK(res->ok);
    }
    CHECK(r.proc.wait(15000) == (by_signal ? 130 : 0));
    CHECK(eventually([&] { return all_gone(pids); }, 3000));
    const std::string out = r.proc.output();
    CHECK(out.find("checkpoint in " + r.dir + "/out/checkpoint") != std::string::npos);
    // the report draws the stop as a stop (on the throughput and the loss plots), not as a failure
    const std::string report = file_text(r.dir + "/out/report.html");
    CHECK(occurrences(report, "class=\"mark stop\"") == 2);
    CHECK(occurrences(report, "class=\"mark failure\"") == 0);
    std::error_code ec;  // no half-written snapshot is left behind
    for (const auto& snap : std::filesystem::directory_iterator(r.dir + "/out/snapshots", ec))
      CHECK(std::filesystem::exists(snap.path() / "complete"));
    // the checkpoint is of the last committed step, and a run resumes from it
    auto steps = metrics_column(r.dir + "/out", "step");
    REQUIRE_FALSE(steps.empty());
    const std::string manifest = file_text(r.dir + "/out/checkpoint/manifest");
    CHECK(manifest.find("step " + std::to_string(int64_t(steps.back()) + 1) + "\n") == 0);
    Proc again = spawn({bin(), "run", "--nodes", "3", "--steps", std::to_string(int64_t(steps.back()) + 4), "--resume",
                        r.dir + "/out", "--out", r.dir + "/again"},
                       r.dir + "/again.out");
    CHECK(again.wait(30000) == 0);
    auto resumed = metrics_column(r.dir + "/again", "step");
    REQUIRE(resumed.size() == 3);
    CHECK(resumed.front() == steps.back() + 1);
  }
}

TEST_CASE("t0308-snapshot-is-a-checkpoint: sample and run --resume take a complete dense snapshot") {
  std::string dir = temp_dir("snapres");
  Proc first = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "30", "--set", "train.checkpoint_every=10",
                      "--out", dir + "/first"},
                     dir + "/first.out");
  REQUIRE(first.wait(30000) == 0);
  const std::string snap = dir + "/first/snapshots/step-20";
  REQUIRE(std::filesystem::exists(snap + "/manifest"));
  Proc sample = spawn({bin(), "sample", "--checkpoint", snap, "--prompt", "The ", "--bytes", "20"}, dir + "/sample.out");
  CHECK(sample.wait(20000) == 0);
  Proc again = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "24", "--set", "train.checkpoint_every=10",
                      "--resume", snap, "--out", dir + "/again"},
                     dir + "/again.out");
  CHECK(again.wait(30000) == 0);
  auto steps = metrics_column(dir + "/again", "step");
  REQUIRE(steps.size() == 4);
  CHECK(steps.front() == 20);
}

TEST_CASE("t0302-run-sigkill: SIGKILL of the run takes every agent and worker with it") {
  IdleRun r;
  auto pids = r.wait_ready();
  ::kill(r.proc.pid(), SIGKILL);  // the run only, not its group
  CHECK(r.proc.wait(3000) == 128 + SIGKILL);
  CHECK(eventually([&] { return all_gone(pids); }, 3000));
}

TEST_CASE("t0303-run-job-stop: job.stop() from the REPL ends the run with exit code 0") {
  IdleRun r;
  auto pids = r.wait_ready();
  auto res = r.client->eval("job.stop()");
  REQUIRE(res.ok());
  CHECK(res->ok);
  CHECK(r.proc.wait(8000) == 0);
  CHECK(eventually([&] { return all_gone(pids); }, 3000));
}

TEST_CASE("t0304-run-bad-job: a broken job file is refused with the file, the key and the rule") {
  std::string dir = temp_dir("run");
  Proc w = spawn({"/bin/sh", "-c", "printf 'return { mesh = { nodes = 0 } }' > " + dir + "/bad.lua"}, dir + "/w.out");
  REQUIRE(w.wait(2000) == 0);
  Proc run = spawn({bin(), "run", dir + "/bad.lua"}, dir + "/run.out");
  CHECK(run.wait(5000) == 1);
  CHECK(run.output().find(dir + "/bad.lua: mesh.nodes: expected an integer in [1, 1024], got 0") != std::string::npos);
}

TEST_CASE("t0313-run-too-few-nodes: a local mesh that cannot hold every expert is refused at once, not after waiting") {
  std::string dir = temp_dir("run");
  // the embedded job with 16 experts: 2 nodes x 6 slots hold 12, so no plan could ever be made
  Proc run = spawn({bin(), "run", "--nodes", "2", "--set", "model.experts=16", "--steps", "1", "--out", dir + "/out"},
                   dir + "/run.out");
  CHECK(run.wait(10000) == 1);
  CHECK(run.output().find("2 worker(s) (2 nodes x mesh.devices = \"cpu:1\") x policies.slots = 6 cannot hold the 16 "
                          "experts") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/out/events.csv"));  // nothing was started
  // three nodes hold them: the same job runs
  Proc ok = spawn({bin(), "run", "--nodes", "3", "--set", "model.experts=16", "--steps", "1", "--out", dir + "/ok"},
                  dir + "/ok.out");
  CHECK(ok.wait(60000) == 0);
}

TEST_CASE("t0305-steps-survive-a-kill: steps keep committing after a node is lost and none is lost") {
  TestMesh m({.steps = 1000000000});
  m.start();
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() > 30; }, 20000));
  m.agents[0].signal(SIGKILL);
  REQUIRE(eventually([&] { return m.status()["nodes"]["dead"] == 1; }, 2000));
  int64_t at_loss = m.status()["step"];
  CHECK(eventually([&] { return m.status()["step"].get<int64_t>() > at_loss + 30; }, 20000));
  auto s = m.status();
  CHECK(s["workers"]["ready"] == 3);
  CHECK(s["steps_aborted"].get<int64_t>() <= 1);
}

TEST_CASE("t0306-run-resume: a run resumed from its checkpoint ends where the uninterrupted run ends, bit for bit") {
  const std::string dir = temp_dir("resume");
  // No re-plan on loads and no snapshots inside the 12 steps: the resumed run's plan is the
  // uninterrupted run's, so the same ranks sum the same gradients in the same order. The 12 steps
  // are inside the default job's warmup (30 steps), where the learning rate does not depend on
  // train.steps: the first run's 6 (--steps sets it) and the others' 12 give the same rates.
  const std::string sets = "train.rebalance_every=1000,train.checkpoint_every=0";
  auto run = [&](std::vector<std::string> extra, const std::string& out) {
    std::vector<std::string> argv{bin(), "run", "--nodes", "2", "--set", sets, "--out", dir + "/" + out, "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Proc p = spawn(argv, dir + "/" + out + ".txt");
    const int rc = p.wait(120000);
    INFO(p.output());
    return rc;
  };
  REQUIRE(run({"--steps", "12"}, "whole") == 0);
  REQUIRE(run({"--steps", "6"}, "first") == 0);
  REQUIRE(run({"--steps", "12", "--resume", dir + "/first"}, "second") == 0);

  // the resumed run trained steps 6..11 only
  auto steps = metrics_column(dir + "/second", "step");
  REQUIRE(steps.size() == 6);
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == double(6 + i));
  auto whole_loss = metrics_column(dir + "/whole", "loss"), second_loss = metrics_column(dir + "/second", "loss");
  REQUIRE(whole_loss.size() == 12);
  for (size_t i = 0; i < 6; ++i) CHECK(second_loss[i] == whole_loss[6 + i]);
  // both final checkpoints hold the same bytes: weights and both AdamW moments, every unit
  size_t units = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/whole/checkpoint")) {
    const std::string name = f.path().filename().string();
    CAPTURE(name);
    REQUIRE(std::filesystem::exists(dir + "/second/checkpoint/" + name));
    CHECK(file_text(f.path().string()) == file_text(dir + "/second/checkpoint/" + name));
    ++units;
  }
  CHECK(units > 3);
  bool resumed = false;
  for (const auto& e : events(dir + "/second")) resumed |= e.kind == "resume_begun";
  CHECK(resumed);

  // a checkpoint of another model (even confirmed), or not before the steps to run, is refused with the reason
  Proc other = spawn({bin(), "run", "--set", "model.d_model=32,model.heads=2", "--steps", "12", "--resume", dir + "/first",
                      "--resume-anyway", "--out", dir + "/other"},
                     dir + "/other.txt");
  CHECK(other.wait(20000) == 2);
  CHECK(other.output().find("the checkpoint's model has d_model 64, the job's model.d_model is 32") != std::string::npos);
  Proc late = spawn({bin(), "run", "--steps", "6", "--resume", dir + "/first", "--out", dir + "/late"}, dir + "/late.txt");
  CHECK(late.wait(20000) == 2);
  CHECK(late.output().find("the checkpoint is of step 6, not before the 6 steps to run") != std::string::npos);
}

TEST_CASE("t0309-steps-is-the-schedule: --steps sets train.steps, so the cosine ends with the run") {
  const std::string dir = temp_dir("steps");
  Proc run = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "10", "--nodes", "2", "--set", "train.warmup=2",
                    "--out", dir + "/run"},
                   dir + "/run.out");
  REQUIRE(run.wait(30000) == 0);
  auto lr = metrics_column(dir + "/run", "lr");
  REQUIRE(lr.size() == 10);
  model::OptimConfig ten;  // the tiny job's lr (the default) over 10 steps
  ten.lr = 3e-3, ten.warmup = 2, ten.total_steps = 10;
  CHECK(lr.back() == doctest::Approx(model::learning_rate(ten, 9)).epsilon(1e-3));
  CHECK(lr.back() < 0.2 * ten.lr);  // near the end of the cosine, not at its start (train.steps 200)

  // --steps and a --set train.steps that disagree are refused, naming both
  Proc both = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "10", "--set", "train.steps=30", "--out",
                     dir + "/both"},
                    dir + "/both.out");
  CHECK(both.wait(10000) == 2);
  CHECK(both.output().find("--steps 10 and --set train.steps=30 disagree") != std::string::npos);
}

TEST_CASE("t0312-resume-the-saved-job: --resume trains the job the run recorded, and another job is refused key by key") {
  const std::string dir = temp_dir("resumejob");
  Proc first = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "6", "--nodes", "2", "--out", dir + "/first"},
                     dir + "/first.out");
  REQUIRE(first.wait(30000) == 0);

  // no job file: the run's own job (the tiny one), not the embedded default
  Proc again = spawn({bin(), "run", "--steps", "8", "--nodes", "2", "--resume", dir + "/first", "--out", dir + "/again"},
                     dir + "/again.out");
  CHECK(again.wait(30000) == 0);
  INFO(again.output());
  CHECK(again.output().find("resuming job tiny of " + dir + "/first") != std::string::npos);
  auto steps = metrics_column(dir + "/again", "step");
  REQUIRE(steps.size() == 2);
  CHECK(steps.front() == 6);

  // a --set or a job file that changes the job: every key named, saved vs now, and refused
  Proc lr = spawn({bin(), "run", "--set", "train.lr=0.001,train.seed=7", "--steps", "8", "--resume", dir + "/first",
                   "--out", dir + "/lr"},
                  dir + "/lr.out");
  CHECK(lr.wait(10000) == 2);
  CHECK(lr.output().find("train.lr: saved 0.003, now 0.001") != std::string::npos);
  CHECK(lr.output().find("train.seed: saved 1, now 7") != std::string::npos);
  CHECK(lr.output().find("--resume-anyway") != std::string::npos);
  std::filesystem::create_directories(dir + "/other");
  const std::string other = dir + "/other/tiny.lua";
  std::ofstream(other) << "return { name = 'tiny', " << MeshOptions{}.model << " data = { path = '" SAL_SOURCE_DIR
                       << "/README.md' }, train = { batch = 8 } }\n";
  Proc data = spawn({bin(), "run", other, "--steps", "8", "--resume", dir + "/first", "--out", dir + "/data"},
                    dir + "/data.out");
  CHECK(data.wait(10000) == 2);
  CHECK(data.output().find("data.path: saved " SAL_SOURCE_DIR "/docs, now " SAL_SOURCE_DIR "/README.md") !=
        std::string::npos);
  // confirmed: the new job goes on from the checkpoint
  Proc anyway = spawn({bin(), "run", other, "--steps", "8", "--nodes", "2", "--resume", dir + "/first", "--resume-anyway",
                       "--out", dir + "/anyway"},
                      dir + "/anyway.out");
  CHECK(anyway.wait(30000) == 0);
  CHECK(metrics_column(dir + "/anyway", "step").front() == 6);

  // every mode of --modes from the same checkpoint (as a drill from a trained state compares them),
  // the source only read
  const auto source_files = std::distance(std::filesystem::directory_iterator(dir + "/first"), {});
  Proc modes = spawn({bin(), "run", "--steps", "8", "--nodes", "2", "--resume", dir + "/first", "--modes",
                      "elastic,checkpoint-restart", "--out", dir + "/modes"},
                     dir + "/modes.out");
  CHECK(modes.wait(60000) == 0);
  INFO(modes.output());
  for (const char* mode : {"elastic", "checkpoint-restart"}) {
    CAPTURE(mode);
    auto resumed_steps = metrics_column(dir + "/modes/" + mode, "step");
    REQUIRE(resumed_steps.size() == 2);
    CHECK(resumed_steps.front() == 6);
  }
  CHECK(std::filesystem::exists(dir + "/modes/compare.html"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir + "/first"), {}) == source_files);
}

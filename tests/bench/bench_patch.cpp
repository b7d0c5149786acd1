// bench_patch.cpp — what a worker lost in the middle of a step costs a job of data-parallel groups
// (parallel.groups = 4 over 8 workers, or --groups G), with the step patched (redundancy = spare,
// r = 2) against the step aborted and run again (redundancy = none): real `salamander run`
// processes, the same worker SIGKILLed at the same point of the same step (`kill{during =
// "backward" | "allreduce"}`).
//
// Per trial, from the run's metrics.csv and summary.json:
//   normal step       the median time of the steps before the failure (StepBegin to the last vote)
//   loss -> commit    from the loss noticed to the failed step committed: the patch (the lost
//                     group's shard type computed by another group, the ranks left meeting on a
//                     data plane of their own, the synchronisation) or the abort (a re-plan over
//                     the survivors, the state moved, the step computed again)
//   loss -> next      from the loss to the step after it committed
//   step after        from the failed step's commit to the next one's: after a patch, a degraded
//                     step (the damaged group out, its shard type computed by another group, over
//                     the patch's data plane: no re-plan); after an abort, a step of the new plan
//   after 10 steps    from the failed step's commit to the tenth step after it (spare's default
//                     regroups once degraded steps have lost a plan switch's cost: that is here)
//   aborted, patched  the run's counts
// Trials alternate the two policies. Fair measurement (--cpu-share, on by default where the cgroup
// v1 cpu controller is writable): each worker in a CPU cgroup of (cores x 0.9) / 8 CPUs.
//
// usage: bench_patch [--trials 5] [--steps 40] [--at 20] [--d-model 64] [--batch 32]
//                    [--slots 4] [--groups 4] [--cpu-share F | --no-cpu-share]
// --slots 8 (groups8.lua's): a group of one worker holds every expert, so the group that lost a rank
// stays a group of its own when the survivors regroup, and the others keep their data planes.
// --groups 8 (with --slots 8): eight groups of one worker, the lost type's patch shared by seven.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "report/run_files.h"
#include "support/bench_share.h"
#include "support/bench_table.h"
#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr int kNodes = 8;

struct Setup {
  int trials = 5, steps = 40, at = 20, d_model = 64, batch = 32, slots = 4, groups = 4;
  double cpu_share = -1;  // -1: (cores x 0.9) / nodes where available; 0: off
};

struct Trial {
  double normal_ms = 0, to_commit_ms = 0, to_next_ms = 0, after_ms = 0, after10_ms = 0;
  double aborted = 0, patched = 0;
  bool ok = false;
};

std::string job_text(const Setup& s, const std::string& redundancy) {
  std::string r = redundancy == "none" ? "0" : "2";
  return "return {\n  name = 'bench-patch',\n"
         "  model = { layers = 2, d_model = " + std::to_string(s.d_model) + ", heads = 4, experts = 8, top_k = 2, "
         "seq_len = 64 },\n  data = { path = '" SAL_SOURCE_DIR "/docs' },\n"
         "  train = { steps = " + std::to_string(s.steps) + ", batch = " + std::to_string(s.batch) +
         ", lr = 1e-2, warmup = 5, rebalance_every = 0, checkpoint_every = 0 },\n"
         "  parallel = { groups = " + std::to_string(s.groups) + ", redundancy = " + r + " },\n"
         "  mesh = { nodes = " + std::to_string(kNodes) + " },\n"
         "  policies = { slots = " + std::to_string(s.slots) + ", redundancy = '" + redundancy + "' },\n}\n";
}

Trial run_once(const Setup& s, const std::string& redundancy, const std::string& during) {
  std::string dir = temp_dir("patch");
  std::ofstream(dir + "/job.lua") << job_text(s, redundancy);
  std::ofstream(dir + "/drill.lua") << "drill{ name = 'mid-step', steps = " << s.steps << ", seed = 1 }\n"
                                    << "kill{ node = 3, step = " << s.at << ", during = '" << during << "' }\n";
  std::vector<std::string> argv{bin(), "run", dir + "/job.lua", "--drill", dir + "/drill.lua", "--out", dir + "/out"};
  if (s.cpu_share > 0) argv.insert(argv.end(), {"--cpu-share", std::to_string(s.cpu_share)});
  Trial t;
  Proc p = spawn(argv, dir + "/run.out");
  int rc = p.wait(600000);
  auto run = report::load_run(dir + "/out");
  if (rc != 0 || !run) {
    std::fprintf(stderr, "%s, kill during %s: the run failed (exit %d); see %s/run.out\n", redundancy.c_str(),
                 during.c_str(), rc, dir.c_str());
    return t;
  }
  std::vector<double> before;
  double at_at = 0, next_at = 0, tenth_at = 0;
  for (const auto& m : run->metrics) {
    if (m.step >= 5 && m.step < uint64_t(s.at)) before.push_back(m.step_ms);
    if (m.step == uint64_t(s.at)) at_at = m.time_s;
    if (m.step == uint64_t(s.at) + 1) next_at = m.time_s;
    if (m.step == uint64_t(s.at) + 10) tenth_at = m.time_s;
  }
  const auto& rec = run->summary.value("recoveries", nlohmann::json::array());
  if (before.empty() || rec.empty() || next_at == 0) {
    std::fprintf(stderr, "%s, kill during %s: no failure recorded; see %s\n", redundancy.c_str(), during.c_str(), dir.c_str());
    return t;
  }
  double loss_at = rec[0]["at_s"];
  t.normal_ms = percentile(before, 0.5);
  t.to_commit_ms = rec[0]["seconds"].get<double>() * 1e3;
  t.to_next_ms = (next_at - loss_at) * 1e3;
  t.after_ms = (next_at - at_at) * 1e3;
  t.after10_ms = tenth_at > 0 ? (tenth_at - at_at) * 1e3 : 0;
  t.aborted = run->number("aborted_steps").value_or(0);
  t.patched = run->number("patched_steps").value_or(0);
  t.ok = true;
  return t;
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: bench_patch [--trials N] [--steps S] [--at STEP] [--d-model D] [--batch B] "
                       "[--slots N] [--groups G] [--cpu-share F | --no-cpu-share]\n");
  std::exit(2);
}

Setup parse(int argc, char** argv) {
  Setup s;
  const std::map<std::string, int*> ints = {{"--trials", &s.trials}, {"--steps", &s.steps}, {"--at", &s.at},
                                            {"--d-model", &s.d_model}, {"--batch", &s.batch}, {"--slots", &s.slots},
                                            {"--groups", &s.groups}};
  if (!parse_bench_options(argc, argv, ints, {}, s.cpu_share)) usage();
  if (s.at < 6 || s.at + 11 >= s.steps || s.groups < 2 || kNodes % s.groups != 0) usage();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Setup s = parse(argc, argv);
  s.cpu_share = fair_cpu_share(s.cpu_share, kNodes);
  std::printf("a worker lost mid-step: %d workers in %d groups of %d, d %d, 2 layers, 8 experts on %d slots a "
              "worker, batch %d x 64; node 3 killed in step %d; %d trials per cell\n",
              kNodes, s.groups, kNodes / s.groups, s.d_model, s.slots, s.batch, s.at, s.trials);
  if (s.cpu_share > 0)
    std::printf("each worker in a CPU cgroup of %.3f CPU (%u cores)\n\n", s.cpu_share, std::thread::hardware_concurrency());
  else
    std::printf("workers unconfined (time-sharing the cores)\n\n");
  std::printf("| redundancy | killed during | normal step p50 (ms) | loss -> step committed p50 (ms) | "
              "loss -> next step p50 (ms) | step after p50 (ms) | after / normal | after 10 steps p50 (ms) | aborted | "
              "patched |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const char* during : {"backward", "allreduce"}) {
    std::map<std::string, std::vector<Trial>> got;
    for (int i = 0; i < s.trials; ++i)
      for (const char* r : {"spare", "none"}) {
        Trial t = run_once(s, r, during);
        if (t.ok) got[r].push_back(t);
      }
    for (const char* r : {"spare", "none"}) {
      const auto& v = got[r];
      if (v.empty()) {
        std::printf("| %s | %s | — | — | — | — | — | — | — | — |\n", r, during);
        continue;
      }
      auto col = [&](double Trial::*f) {
        std::vector<double> x;
        for (const Trial& t : v) x.push_back(t.*f);
        return percentile(x, 0.5);
      };
      std::printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.0f | %.0f | %.0f |\n", r, during, col(&Trial::normal_ms),
                  col(&Trial::to_commit_ms), col(&Trial::to_next_ms), col(&Trial::after_ms),
                  col(&Trial::after_ms) / col(&Trial::normal_ms), col(&Trial::after10_ms), col(&Trial::aborted),
                  col(&Trial::patched));
    }
  }
  return 0;
}

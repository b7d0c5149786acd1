// cmd_sim.cpp — `salamander sim`: dispatches a scenario file (cmd_sim_scenario.cpp), `sim fit`
// (the calibration, engine/sim/calibrate.h), and the quick commands, each a Monte Carlo on the event core (or the algorithm
// library's SPARe simulation) printed beside its closed form:
//   sim ettr  --mtbf S --iter-time S --interval N --ckpt-time S [--restart S] [--weibull K]
//   sim spare --groups N --redundancy R [--trials T]
// Both take --trials, --seed and --json.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/paths.h"
#include "sim/calibrate.h"
#include "policy/algo/spare.h"
#include "sim/ettr.h"

namespace sal::cli {
namespace {

int sim_ettr(const Args& args) {
  Command cmd{"sim ettr", "sim ettr --mtbf S --iter-time S --interval N --ckpt-time S [options]",
              "The effective training time ratio of a job that checkpoints every N iterations, under failures "
              "with the given mean time between them: simulated on the event core, beside the closed form "
              "(exponential failures). The model is in engine/sim/ettr.h.",
              {{"--mtbf", "S", "mean time between the job's failures (seconds)"},
               {"--iter-time", "S", "one iteration (seconds)"},
               {"--interval", "N", "iterations between checkpoints"},
               {"--ckpt-time", "S", "a checkpoint's blocking time (seconds)"},
               {"--restart", "S", "failure to training again (seconds, default 60)"},
               {"--weibull", "K", "Weibull failures with shape K instead of exponential"},
               {"--segments", "N", "checkpoint intervals per trial (default 2000)"},
               {"--trials", "T", "independent runs (default 20)"},
               {"--seed", "S", "seed (default 1)"},
               {"--json", "", "print as JSON"}},
              0};
  int code = 0;
  auto p = parse_command(cmd, args, code);
  if (!p) return code;
  auto mtbf = p->get_double("--mtbf"), iter = p->get_double("--iter-time"), ckpt = p->get_double("--ckpt-time"),
       restart = p->get_double("--restart", 60.0);
  auto interval = p->get_int("--interval", 0, 1, int64_t(1) << 40);
  auto segments = p->get_int("--segments", 2000, 1, int64_t(1) << 30);
  auto trials = p->get_int("--trials", 20, 1, 1 << 20);
  auto seed = p->get_int("--seed", 1, 0, INT64_MAX);
  for (const auto* r : {&mtbf, &iter, &ckpt, &restart})
    if (!*r) return usage_error(cmd, r->error().message());
  for (const auto* r : {&interval, &segments, &trials, &seed})
    if (!*r) return usage_error(cmd, r->error().message());
  if (*interval == 0) return usage_error(cmd, "--interval N is required");
  auto law = p->has("--weibull") ? [&]() -> Result<sim::FailureLaw> {
    auto k = p->get_double("--weibull");
    if (!k) return k.error();
    return sim::weibull(*mtbf, *k);
  }() : sim::exponential(*mtbf);
  if (!law) return usage_error(cmd, law.error().message());
  sim::EttrModel m{*iter, *interval, *ckpt, *restart, *law};
  auto simulated = sim::simulate_ettr(m, *segments, int(*trials), uint64_t(*seed));
  if (!simulated) return usage_error(cmd, simulated.error().message());
  auto closed = sim::ettr_closed_form(m);
  nlohmann::ordered_json j;
  j["failures"] = law->describe();
  j["ettr"] = simulated->ettr;
  j["ettr_stderr"] = simulated->stderr_ettr;
  j["ettr_closed_form"] = closed ? nlohmann::json(*closed) : nlohmann::json();
  j["failures_per_hour"] = simulated->failures_per_hour;
  j["events"] = simulated->events;
  if (p->has("--json")) return std::puts(j.dump().c_str()), 0;
  std::printf("ETTR (%s; %lld iterations of %g s between %g s checkpoints; restart %g s)\n", law->describe().c_str(),
              (long long)*interval, *iter, *ckpt, *restart);
  std::printf("  simulated    %.4f ± %.4f  (%d trials x %lld intervals, %llu events, %.2f failures/h)\n",
              simulated->ettr, simulated->stderr_ettr, int(*trials), (long long)*segments,
              (unsigned long long)simulated->events, simulated->failures_per_hour);
  if (closed) std::printf("  closed form  %.4f\n", *closed);
  else std::printf("  closed form  -  (%s)\n", closed.error().message().c_str());
  return 0;
}

int sim_spare(const Args& args) {
  Command cmd{"sim spare", "sim spare --groups N --redundancy R [--trials T] [--seed S] [--json]",
              "SPARe: groups fail one at a time in random order until some shard type is wiped out. The Monte "
              "Carlo's mean failures endured and mean all-reduce depth, beside the closed forms mu(N, r) and "
              "the depth's counting lower bound.",
              {{"--groups", "N", "data-parallel groups"},
               {"--redundancy", "R", "shards per group"},
               {"--trials", "T", "trials (default 1000)"},
               {"--seed", "S", "seed (default 1)"},
               {"--json", "", "print as JSON"}},
              0};
  int code = 0;
  auto p = parse_command(cmd, args, code);
  if (!p) return code;
  auto n = p->get_int("--groups", 0, 1, 1 << 20);
  auto trials = p->get_int("--trials", 1000, 1, 1 << 24);
  auto seed = p->get_int("--seed", 1, 0, INT64_MAX);
  if (!n || *n == 0) return usage_error(cmd, "--groups N is required");
  auto r = p->get_int("--redundancy", 0, 1, *n);
  if (!r || *r == 0) return usage_error(cmd, "--redundancy R is required (1..N)");
  if (!trials || !seed) return usage_error(cmd, "--trials and --seed take integers");
  auto mc = algo::simulate_spare(int(*n), int(*r), {int(*trials), uint64_t(*seed), true});
  if (!mc) return usage_error(cmd, mc.error().message());
  auto mu = algo::mean_failures_endured(int(*n), int(*r));
  auto bound = algo::mean_overhead(int(*n), int(*r));
  nlohmann::ordered_json j;
  j["groups"] = *n;
  j["redundancy"] = *r;
  j["trials"] = mc->trials;
  j["mean_failures"] = mc->mean_endured;
  j["mean_failures_stderr"] = mc->stderr_endured;
  j["mean_failures_closed_form"] = mu ? nlohmann::json(*mu) : nlohmann::json();
  j["mean_depth"] = mc->mean_depth;
  j["mean_depth_lower_bound"] = bound ? nlohmann::json(*bound) : nlohmann::json();
  if (p->has("--json")) return std::puts(j.dump().c_str()), 0;
  std::printf("SPARe, %lld groups, r = %lld, %d trials\n", (long long)*n, (long long)*r, mc->trials);
  std::printf("  failures endured before a wipe-out  %.2f ± %.2f   closed form mu(N, r) %.2f\n", mc->mean_endured,
              mc->stderr_endured, mu ? *mu : -1.0);
  std::printf("  mean all-reduce depth (rounds)      %.3f          counting lower bound %.3f\n", mc->mean_depth,
              bound ? *bound : -1.0);
  return 0;
}

int cmd_sim_fit(const Args& args) {
  Command cmd{"sim fit", "sim fit RUN_DIR [-o SCENARIO.lua] [--job JOB.lua] [--json]",
              "Writes a scenario that replays a finished run in the simulator: its cluster, its node losses and "
              "joins, a step-time model fitted to its step times, its measured recovery costs and its training "
              "time as the horizon. `salamander sim SCENARIO.lua` then predicts the samples it trained.",
              {{"-o", "FILE", "the scenario to write (default RUN_DIR/sim-fit.lua)"},
               {"--job", "JOB.lua", "the run's job file (default: the one its agent logs name)"},
               {"--json", "", "print the fit as JSON"}},
              1};
  int code = 0;
  auto p = parse_command(cmd, args, code);
  if (!p) return code;
  if (p->positional.size() != 1) return usage_error(cmd, "expected one run directory");
  std::string dir = p->positional[0];
  std::string out = p->get_or("-o", dir + "/sim-fit.lua");
  auto f = sim::calibrate_run(dir, p->get("--job"));
  Status written = f ? write_file(out, sim::calibration_scenario(**f)) : Status(f.error());
  if (!written) {
    std::fprintf(stderr, "salamander sim fit: %s\n", written.error().message().c_str());
    return 1;
  }
  if (p->has("--json")) return std::puts(sim::calibration_json(**f, out).dump().c_str()), 0;
  std::fputs(sim::calibration_summary(**f, out).c_str(), stdout);
  return 0;
}


}  // namespace

int sim_scenario(const Args& args);
void print_scenario_fields();

int cmd_sim(const Args& args) {
  static const char* kUsage =
      "usage: salamander sim SCENARIO.lua [options]   run a scenario file (scripts/experiments/)\n"
      "       salamander sim <fit|ettr|spare> [options] (--help on each)\n\n"
      "  SCENARIO.lua  clusters, failures, workload, strategies (salamander, checkpoint-restart, fixed-ep-ft,\n"
      "                spare, replication, checkpoint-only) and sweeps; a table, JSON and report.html\n"
      "  fit RUN_DIR   a scenario that replays a finished run, its step-time model fitted (calibration)\n"
      "  ettr          effective training time ratio under failures: simulated and closed form\n"
      "  spare         SPARe's failures endured and all-reduce depth: Monte Carlo and closed forms\n"
      "  --fields      every scenario field with its meaning and default\n";
  if (args.empty() || args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--fields") return print_scenario_fields(), 0;
  Args rest(args.begin() + 1, args.end());
  if (args[0] == "ettr") return sim_ettr(rest);
  if (args[0] == "spare") return sim_spare(rest);
  if (args[0] == "fit") return cmd_sim_fit(rest);
  if (args[0].size() > 4 && args[0].substr(args[0].size() - 4) == ".lua") return sim_scenario(args);
  std::fprintf(stderr, "salamander sim: unknown subcommand '%s'\n\n%s", args[0].c_str(), kUsage);
  return 2;
}

}  // namespace sal::cli

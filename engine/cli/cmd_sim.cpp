// cmd_sim.cpp — `salamander sim fit` (the calibration, engine/sim/calibrate.h), `sim stacks` (a grouped run
// against SPARe's model, engine/sim/stacks_fit.h) and the quick
// commands, each a Monte Carlo on the event core (or the algorithm library's SPARe simulation)
// printed beside its closed form: `sim ettr` and `sim spare`. A scenario file is cmd_sim_scenario.cpp.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/paths.h"
#include "sim/calibrate.h"
#include "policy/algo/spare.h"
#include "sim/ettr.h"
#include "sim/stacks_fit.h"

namespace sal::cli {

int sim_ettr(const Command& cmd, const Parsed& p) {
  auto mtbf = p.get_double("--mtbf"), iter = p.get_double("--iter-time"), ckpt = p.get_double("--ckpt-time"),
       restart = p.get_double("--restart", 60.0);
  auto interval = p.get_int("--interval", 0, 1, int64_t(1) << 40);
  auto segments = p.get_int("--segments", 2000, 1, int64_t(1) << 30);
  auto trials = p.get_int("--trials", 20, 1, 1 << 20);
  auto seed = p.get_int("--seed", 1, 0, INT64_MAX);
  for (const auto* r : {&mtbf, &iter, &ckpt, &restart})
    if (!*r) return usage_error(cmd, r->error().message());
  for (const auto* r : {&interval, &segments, &trials, &seed})
    if (!*r) return usage_error(cmd, r->error().message());
  if (*interval == 0) return usage_error(cmd, "--interval N is required");
  auto law = p.has("--weibull") ? [&]() -> Result<sim::FailureLaw> {
    auto k = p.get_double("--weibull");
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
  if (p.has("--json")) return std::puts(j.dump().c_str()), 0;
  std::printf("ETTR (%s; %lld iterations of %g s between %g s checkpoints; restart %g s)\n", law->describe().c_str(),
              (long long)*interval, *iter, *ckpt, *restart);
  std::printf("  simulated    %.4f ± %.4f  (%d trials x %lld intervals, %llu events, %.2f failures/h)\n",
              simulated->ettr, simulated->stderr_ettr, int(*trials), (long long)*segments,
              (unsigned long long)simulated->events, simulated->failures_per_hour);
  if (closed) std::printf("  closed form  %.4f\n", *closed);
  else std::printf("  closed form  -  (%s)\n", closed.error().message().c_str());
  return 0;
}

int sim_spare(const Command& cmd, const Parsed& p) {
  auto n = p.get_int("--groups", 0, 1, 1 << 20);
  auto trials = p.get_int("--trials", 1000, 1, 1 << 24);
  auto seed = p.get_int("--seed", 1, 0, INT64_MAX);
  if (!n) return usage_error(cmd, n.error().message());
  if (*n == 0) return usage_error(cmd, "--groups N is required");
  auto r = p.get_int("--redundancy", 0, 1, *n);
  if (!r) return usage_error(cmd, r.error().message());
  if (*r == 0) return usage_error(cmd, "--redundancy R is required (1..N)");
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
  if (p.has("--json")) return std::puts(j.dump().c_str()), 0;
  std::printf("SPARe, %lld groups, r = %lld, %d trials\n", (long long)*n, (long long)*r, mc->trials);
  std::printf("  failures endured before a wipe-out  %.2f ± %.2f   closed form mu(N, r) %.2f\n", mc->mean_endured,
              mc->stderr_endured, mu ? *mu : -1.0);
  std::printf("  mean all-reduce depth (rounds)      %.3f          counting lower bound %.3f\n", mc->mean_depth,
              bound ? *bound : -1.0);
  return 0;
}

int sim_fit(const Command& cmd, const Parsed& p) {
  if (p.positional.size() != 1) return usage_error(cmd, "expected one run directory");
  std::string dir = p.positional[0];
  std::string out = p.get_or("-o", dir + "/sim-fit.lua");
  auto f = sim::calibrate_run(dir, p.get("--job"));
  Status written = f ? write_file(out, sim::calibration_scenario(**f)) : Status(f.error());
  if (!written) {
    std::fprintf(stderr, "salamander sim fit: %s\n", written.error().message().c_str());
    return 1;
  }
  if (p.has("--json")) return std::puts(sim::calibration_json(**f, out).dump().c_str()), 0;
  std::fputs(sim::calibration_summary(**f, out).c_str(), stdout);
  return 0;
}

int sim_stacks(const Command& cmd, const Parsed& p) {
  if (p.positional.size() != 1) return usage_error(cmd, "expected one run directory");
  auto f = sim::fit_stacks(p.positional[0]);
  if (!f) {
    std::fprintf(stderr, "salamander sim stacks: %s\n", f.error().message().c_str());
    return 1;
  }
  if (p.has("--json")) std::puts(sim::stacks_fit_json(*f).dump().c_str());
  else std::fputs(sim::stacks_fit_text(*f).c_str(), stdout);
  return f->agreeing() == f->compared() ? 0 : 1;
}

}  // namespace sal::cli

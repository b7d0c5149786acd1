// cmd_sim_scenario.cpp — `salamander sim SCENARIO.lua`: runs a scenario file (every sweep point,
// strategy and trial), shows progress on stderr, prints the table (or JSON with --json), and writes
// result.json and report.html (the plots) into a directory under runs/sim. Its warnings are said
// once each, with a count at the end; a --set over a swept field says that it replaced the sweep.
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/log.h"
#include "core/paths.h"
#include "report/sim_report.h"
#include "sim/run.h"

namespace sal::cli {
namespace {

// One line, rewritten in place on a terminal; every 10 % otherwise.
class SimProgress {
 public:
  explicit SimProgress(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO)) {}
  void update(const sim::Progress& p) {
    if (quiet_ || p.total == 0) return;
    int decile = int(10 * p.done / p.total);
    if (!tty_ && decile == last_decile_) return;
    last_decile_ = decile;
    double eta = p.done ? p.elapsed_s * double(p.total - p.done) / double(p.done) : 0;
    std::fprintf(stderr, "%ssim %zu/%zu trial runs · %.3g M events · %.1f s · ETA %.0f s · %s%s", tty_ ? "\r\033[K" : "",
                 p.done, p.total, double(p.events) / 1e6, p.elapsed_s, eta, p.current.c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void done() {
    if (!quiet_ && tty_) std::fputs("\r\033[K", stderr);
  }

 private:
  bool quiet_, tty_;
  int last_decile_ = -1;
};

Status write_outputs(const sim::SimResult& r, const std::string& dir) {
  auto j = sim::result_json(r);
  SAL_TRY(write_file(dir + "/result.json", j.dump(1) + "\n"));
  return report::write_sim_report(j, dir + "/report.html");
}

// What the terminal was told more than once, and how often (it said each once as it happened).
void print_repeats() {
  for (const auto& [text, count] : log::repeated_on_stderr())
    std::fprintf(stderr, "said %llu times: %s\n", (unsigned long long)count, text.c_str());
}

void print_scenario_fields() {
  for (const auto& f : sim::scenario_fields())
    std::printf("%-44s %s (default %s)\n", f.path.c_str(), f.doc.c_str(), f.fallback.c_str());
}

}  // namespace

int sim_scenario(const Command& cmd, const Parsed& p) {
  if (p.has("--fields")) return print_scenario_fields(), 0;
  if (p.positional.empty() || !p.positional[0].ends_with(".lua"))
    return usage_error(cmd, (p.positional.empty() ? std::string("a SCENARIO.lua is required")
                                                  : "'" + p.positional[0] + "' is not a SCENARIO.lua") +
                                ", or a subcommand: fit, ettr, spare (salamander sim --help)");
  // Policy loads are logged at info for every trial: keep the terminal to warnings, each said once
  // (a policy that falls back does so at every plan of every trial), counted at the end.
  if (auto s = setup_logging(p, "sim", "", p.has("--log-level") ? "" : "warn", true); !s)
    return usage_error(cmd, s.error().message());
  auto sets = key_values("--set", p.get_or("--set", ""));
  auto trials = p.get_int("--trials", 0, 1, 1 << 24);
  auto seed = p.get_int("--seed", -1, 0, INT64_MAX);
  if (!sets) return usage_error(cmd, sets.error().message());
  if (!trials || !seed) return usage_error(cmd, !trials ? trials.error().message() : seed.error().message());
  auto file = sim::load_scenario_file(p.positional[0], *sets);
  if (!file) return std::fprintf(stderr, "salamander sim: %s\n", file.error().message().c_str()), 1;
  for (const auto& note : file->notes) std::fprintf(stderr, "salamander sim: %s\n", note.c_str());
  SimProgress line(p.has("--quiet") || p.has("--json"));
  sim::RunOptions o{int(*trials), *seed, [&](const sim::Progress& pr) { line.update(pr); }, nullptr};
  auto r = sim::run_simulation(*file, o);
  line.done();
  print_repeats();
  if (!r) return std::fprintf(stderr, "salamander sim: %s\n", r.error().message().c_str()), 1;
  std::string dir;
  if (!p.has("--no-report")) {
    auto d = p.get("--out") ? Result<std::string>(*p.get("--out")) : make_run_dir("runs/sim", r->name);
    if (d && p.get("--out")) {
      if (auto s = make_dirs(*d); !s) d = s.error();
    }
    if (!d) return std::fprintf(stderr, "salamander sim: %s\n", d.error().message().c_str()), 1;
    if (auto s = write_outputs(*r, *d); !s) return std::fprintf(stderr, "salamander sim: %s\n", s.error().message().c_str()), 1;
    dir = *d;
  }
  if (p.has("--json")) return std::puts(sim::result_json(*r).dump().c_str()), 0;
  std::fputs(sim::result_table(*r).c_str(), stdout);
  if (!dir.empty()) std::printf("report %s/report.html · result %s/result.json\n", dir.c_str(), dir.c_str());
  return 0;
}


}  // namespace sal::cli

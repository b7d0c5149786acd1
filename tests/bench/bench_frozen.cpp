// bench_frozen.cpp — what a frozen operator saves (MoEtion's replay of a sparse snapshot): a frozen
// unit runs forward and passes the input gradient back, but computes no weight gradient and takes
// no AdamW update. Times one training step (forward, backward, gradient norm, AdamW) of moe-gpt in
// one process (all experts local) with nothing frozen, with every expert frozen (the first slots
// of a window that orders experts first), and with every unit frozen, on the same batches.
//
// How to read it: "ms/step" is the best of --repeat runs of --steps timed steps (each after 2
// untimed ones), the modes alternating so a busy machine slows each alike; "saved" is 1 - ms/step
// over the all-active step's. The paper's figure for a frozen operator is about a third less
// compute; a whole step saves less, since attention's and the LM head's input gradients remain.
//
//   bench_frozen [--threads N] [--steps S] [--repeat R]     defaults: 2 threads, 10 steps, 3 repeats
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "model/data.h"
#include "model/local_exchange.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"
#include "model/params.h"
#include "model_configs.h"
#include "one_process_step.h"

using namespace sal;
using namespace sal::model;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;

struct Mode {
  const char* name;
  std::function<bool(const Unit&)> frozen;
};

const std::vector<Mode>& modes() {
  static const std::vector<Mode> all = {
      {"all active", [](const Unit&) { return false; }},
      {"experts frozen", [](const Unit& u) { return u.id.kind == UnitKind::expert; }},
      {"all frozen", [](const Unit&) { return true; }},
  };
  return all;
}

// ms per step over `steps` timed steps.
double time_steps(Params& p, const Corpus& c, int batch, int steps) {
  double ms = 0;
  for (int s = 0; s < kWarmup + steps; ++s) {
    auto t0 = Clock::now();
    bench::update(p, bench::forward_backward(p, c, batch, s), s);
    if (s >= kWarmup) ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  return ms / steps;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = bench::int_arg(argc, argv, "--threads", 2), steps = bench::int_arg(argc, argv, "--steps", 10), repeat = bench::int_arg(argc, argv, "--repeat", 3);
  kernels::cpu::set_threads(threads);
  const auto& configs = bench::model_configs();
  Corpus corpus = bench::random_corpus();
  std::printf("frozen operators, one process, %d threads, best of %d x %d steps\n\n", threads, repeat, steps);
  std::printf("| model | mode | ms/step | saved |\n| --- | --- | ---: | ---: |\n");
  for (const auto& cfg : configs) {
    std::vector<double> best(modes().size(), 1e300);
    for (int r = 0; r < repeat; ++r)
      for (size_t m = 0; m < modes().size(); ++m) {
        Params p = Params::create(cfg.dims, 1, Params::all_experts(cfg.dims));
        for (Unit* u : p.units()) u->frozen = modes()[m].frozen(*u);
        best[m] = std::min(best[m], time_steps(p, corpus, cfg.batch, steps));
      }
    for (size_t m = 0; m < modes().size(); ++m)
      std::printf("| %s | %s | %.1f | %.0f %% |\n", cfg.name, modes()[m].name, best[m], 100.0 * (1.0 - best[m] / best[0]));
  }
  return 0;
}

// bench_train.cpp — CPU training-step throughput of each model family against its peer, the same
// architecture in eager PyTorch (tests/bench/torch_moe_gpt.py, torch_moe_llama.py for --config llama;
// run as a subprocess with Debian's /usr/bin/python3),
// on the same machine, the same threads, the same shapes and the same optimizer (docs/performance.md target:
// ours >= PyTorch eager). One step = fresh batch, forward, backward, global-norm clip, AdamW; each
// side runs kWarmupSteps untimed steps and then --steps timed ones, all experts in one process
// (LocalExchange for ours).
//
// How to read it: "tok/s" is batch * seq * steps / timed wall time; "ratio" is ours / PyTorch's
// tok/s, above 1 meaning we are faster. The loss columns (first step, last step, each side with its
// own batches and initial weights) are there to show both sides really train: both start near
// ln 256 = 5.55 and fall. A second table splits our step into batch, forward + backward, gradient
// norm and AdamW. Without torch the peer columns read "n/a" with the reason; nothing fails.
//
//   bench_train [--threads N] [--steps S] [--data PATH] [--no-torch] [--repeat R] [--config NAME]
//     defaults: 2 threads, 20 steps, /usr/share/games/fortunes (else the repo's docs/), 1 repeat.
//     --repeat R runs the two sides alternately R times per config and keeps each side's best run:
//     on a shared machine other processes only ever slow a run down, so the best is the cleanest.
//     --config quickstart|larger|llama runs one configuration only (default: all).
//     --digest-every N digests every unit (weights and moments, core/digest.h) every N steps before the
//     step, as a worker does for its vote (train.digest_every; default 1; 0: none): the "digest"
//     column of the phase table is its cost.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/digest.h"
#include "kernels/cpu/ops.h"
#include "model/data.h"
#include "model/local_exchange.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "model/params.h"
#include "model_configs.h"

using namespace sal;
using namespace sal::model;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmupSteps = 3;       // untimed: first-touch allocations, OpenBLAS buffers, caches
constexpr uint64_t kSeed = 1;
constexpr const char* kPython = "/usr/bin/python3";  // Debian's interpreter, where torch is installed
constexpr const char* kFortunes = "/usr/share/games/fortunes";

using Config = bench::ModelConfig;
const std::vector<Config>& configs() { return bench::model_configs(); }

struct Options {
  int threads = 2;
  int steps = 20;
  int repeat = 1;
  std::string data;
  std::string only;  // one configuration's name, or empty for all
  bool torch = true;
  int digest_every = 1;
};

// One side's measurement; ok = false carries the reason it is missing.
struct Measure {
  bool ok = false;
  std::string why;
  double tok_s = 0, ms_step = 0, first_loss = 0, last_loss = 0;
  size_t params = 0;
};

// Where our step's time goes (ms per timed step).
struct Breakdown {
  double digest = 0, batch = 0, fwd_bwd = 0, norm = 0, adamw = 0;
};

Measure missing(std::string why) {
  Measure m;
  m.why = std::move(why);
  return m;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool exists(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0;
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "bench_train: %s\n", msg.c_str());
  std::exit(1);
}

Options parse_args(int argc, char** argv) {
  Options o;
  o.data = exists(kFortunes) ? kFortunes : std::string(SAL_SOURCE_DIR) + "/docs";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads") o.threads = std::atoi(value().c_str());
    else if (a == "--steps") o.steps = std::atoi(value().c_str());
    else if (a == "--data") o.data = value();
    else if (a == "--no-torch") o.torch = false;
    else if (a == "--repeat") o.repeat = std::atoi(value().c_str());
    else if (a == "--config") o.only = value();
    else if (a == "--digest-every") o.digest_every = std::atoi(value().c_str());
    else die("unknown argument " + a +
             " (usage: bench_train [--threads N] [--steps S] [--data PATH] [--no-torch] [--repeat R] [--config NAME] [--digest-every N])");
  }
  if (o.threads < 1 || o.steps < 1 || o.repeat < 1) die("--threads, --steps and --repeat must be >= 1");
  if (o.digest_every < 0) die("--digest-every must be >= 0");
  return o;
}

// Our training state: weights, the model, its in-process exchange, the optimizer settings.
struct Trainer {
  Params params;
  std::unique_ptr<Model> model;
  LocalExchange exchange;
  OptimConfig optim;
  int batch;
  int digest_every;
  int64_t updates = 0;
  uint64_t digests = 0;  // folded together, so the compiler cannot drop them

  Trainer(const Config& c, int every)
      : params(Params::create(c.dims, kSeed, Params::all_experts(c.dims))), model(make_model(params)), exchange(params),
        batch(c.batch), digest_every(every) {}

  // Every unit's digest, as a worker takes them for its vote (runtime/trainer_digests.cpp).
  void digest_units() {
    for (const Unit* u : params.units()) {
      uint64_t h = digest_floats(u->w.data(), u->w.size());
      h = digest_floats(u->m.data(), u->m.size(), h);
      digests ^= digest_floats(u->v.data(), u->v.size(), h);
    }
  }

  // One full step; returns its loss (ce mean + aux) and adds its phases' times to `bd`.
  double step(const Corpus& corpus, Breakdown& bd) {
    const auto td = Clock::now();
    if (digest_every > 0 && updates % digest_every == 0) digest_units();
    const auto t0 = Clock::now();
    bd.digest += ms_between(td, t0);
    params.zero_grads();
    Batch b = make_batch(corpus, kSeed, uint64_t(updates), 0, batch, params.dims.seq_len);
    const int64_t tokens = int64_t(batch) * params.dims.seq_len;
    const auto t1 = Clock::now();
    auto stats = model->step(b, tokens, exchange);
    if (!stats) die("model step: " + stats.error().message());
    const auto t2 = Clock::now();
    double sq = 0;
    for (Unit* u : params.units()) sq += grad_sum_squares(*u);
    const double scale = clip_scale(optim, std::sqrt(sq));
    const auto t3 = Clock::now();
    apply_adamw(params, optim, learning_rate(optim, updates), scale, updates + 1);
    ++updates;
    const auto t4 = Clock::now();
    bd.batch += ms_between(t0, t1), bd.fwd_bwd += ms_between(t1, t2);
    bd.norm += ms_between(t2, t3), bd.adamw += ms_between(t3, t4);
    return stats->ce_sum / double(tokens) + stats->aux;
  }
};

Measure run_ours(const Config& c, const Corpus& corpus, const Options& o, Breakdown& per_step) {
  Trainer tr(c, o.digest_every);
  Measure m;
  Breakdown untimed, timed;
  m.first_loss = tr.step(corpus, untimed);
  for (int i = 1; i < kWarmupSteps; ++i) tr.step(corpus, untimed);
  const auto t0 = Clock::now();
  for (int i = 0; i < o.steps; ++i) m.last_loss = tr.step(corpus, timed);
  const double ms = ms_between(t0, Clock::now());
  m.ok = true;
  m.ms_step = ms / o.steps;
  m.tok_s = double(c.batch) * c.dims.seq_len * o.steps / (ms / 1e3);
  m.params = tr.params.parameter_count();
  per_step = {timed.digest / o.steps, timed.batch / o.steps, timed.fwd_bwd / o.steps, timed.norm / o.steps,
              timed.adamw / o.steps};
  return m;
}

// 'text' for /bin/sh: single quotes, each embedded quote closed, escaped and reopened.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// moe-llama's further shape, in torch_moe_llama.py's options.
std::string llama_args(const Dims& d) {
  char args[256];
  std::snprintf(args, sizeof args, " --kv-heads %d --ffn %d --shared %d --router %s --z-loss %.9g --rope-theta %d%s%s",
                d.kv_heads(), d.ffn(), d.shared_ffn / d.ffn(), d.sigmoid_router ? "sigmoid" : "softmax",
                double(d.z_loss_weight), d.rope_theta, d.norm_topk ? " --norm-topk" : "", d.tied_head ? " --tied" : "");
  return args;
}

std::string torch_command(const Config& c, const Options& o) {
  const Dims& d = c.dims;
  const OptimConfig opt;  // the same schedule as ours
  char args[512];
  std::snprintf(args, sizeof args,
                " --layers %d --d %d --heads %d --experts %d --top-k %d --seq %d --batch %d --threads %d"
                " --steps %d --warmup %d --seed %llu --lr %.17g --lr-warmup %lld --lr-total %lld",
                d.layers, d.d, d.heads, d.experts, d.top_k, d.seq_len, c.batch, o.threads, o.steps, kWarmupSteps,
                (unsigned long long)kSeed, opt.lr, (long long)opt.warmup, (long long)opt.total_steps);
  const std::string script =
      std::string(SAL_SOURCE_DIR) + (d.llama() ? "/tests/bench/torch_moe_llama.py" : "/tests/bench/torch_moe_gpt.py");
  return std::string(kPython) + " " + shell_quote(script) + args + (d.llama() ? llama_args(d) : "") + " --data " +
         shell_quote(o.data) + " 2>&1";
}

// The last non-empty line of a subprocess's output (its error, when it failed).
std::string last_line(const std::string& out) {
  size_t end = out.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "no output";
  size_t start = out.rfind('\n', end);
  return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

Measure parse_torch(const std::string& out) {
  Measure m;
  size_t at = out.rfind("\n{");
  std::string line = out.substr(at == std::string::npos ? 0 : at + 1);
  try {
    auto j = nlohmann::json::parse(line.substr(0, line.find('\n')));
    m.tok_s = j.at("tokens_per_s"), m.ms_step = j.at("ms_per_step");
    m.first_loss = j.at("first_loss"), m.last_loss = j.at("last_loss"), m.params = j.at("params");
    m.ok = true;
  } catch (const std::exception&) {
    m.why = "no result line: " + last_line(out);
  }
  return m;
}

Measure run_torch(const Config& c, const Options& o) {
  if (!o.torch) return missing("--no-torch");
  if (!exists(kPython)) return missing(std::string(kPython) + " not found");
  FILE* p = popen(torch_command(c, o).c_str(), "r");
  if (!p) return missing(std::string("popen: ") + std::strerror(errno));
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  if (status != 0) return missing("exit " + std::to_string(WEXITSTATUS(status)) + ": " + last_line(out));
  return parse_torch(out);
}

std::string fmt(const char* f, double v) {
  char s[64];
  std::snprintf(s, sizeof s, f, v);
  return s;
}

void print_row(const Config& c, const Options& o, const Measure& ours, const Measure& torch) {
  std::string t_tok = torch.ok ? fmt("%.0f", torch.tok_s) : "n/a";
  std::string t_ms = torch.ok ? fmt("%.1f", torch.ms_step) : "n/a";
  std::string ratio = torch.ok ? fmt("%.2f", ours.tok_s / torch.tok_s) : "n/a";
  std::printf("| %s | %zu | %d | %.0f | %.1f | %s | %s | %s |\n", c.name, ours.params, o.threads, ours.tok_s,
              ours.ms_step, t_tok.c_str(), t_ms.c_str(), ratio.c_str());
}

void print_losses(const Config& c, const Measure& ours, const Measure& torch) {
  std::string t = torch.ok ? fmt("%.3f", torch.first_loss) + " -> " + fmt("%.3f", torch.last_loss)
                           : "n/a (" + torch.why + ")";
  std::printf("| %s | %.3f -> %.3f | %s |\n", c.name, ours.first_loss, ours.last_loss, t.c_str());
}

void print_breakdown(const Config& c, const Breakdown& b) {
  const double total = b.digest + b.batch + b.fwd_bwd + b.norm + b.adamw;
  std::printf("| %s | %.3f (%.2f %%) | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c.name, b.digest, 100 * b.digest / total,
              b.batch, b.fwd_bwd, b.norm, b.adamw, total);
}

// The configurations --config picks (all of them by default); an unknown name is an error.
std::vector<Config> selected(const Options& o) {
  std::vector<Config> out;
  for (const Config& c : configs())
    if (o.only.empty() || o.only == c.name) out.push_back(c);
  if (out.empty()) die("unknown --config " + o.only + " (quickstart, larger or llama)");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  const std::vector<Config> runs = selected(o);
  kernels::cpu::set_threads(o.threads);
  int longest = 0;
  for (const Config& c : runs) longest = std::max(longest, c.dims.seq_len);
  auto corpus = Corpus::load(o.data, "bytes", 256, longest);
  if (!corpus) die(corpus.error().message());
  std::printf("data: %s\n", corpus->description().c_str());
  std::vector<Measure> ours, torch;
  std::vector<Breakdown> parts;
  for (const Config& c : runs) {
    Measure best_ours, best_torch;
    Breakdown best_parts;
    for (int r = 0; r < o.repeat; ++r) {
      Breakdown b;
      Measure m = run_ours(c, *corpus, o, b);
      if (r == 0 || m.tok_s > best_ours.tok_s) best_ours = m, best_parts = b;
      Measure t = run_torch(c, o);
      if (r == 0 || (t.ok && (!best_torch.ok || t.tok_s > best_torch.tok_s))) best_torch = t;
    }
    ours.push_back(best_ours);
    parts.push_back(best_parts);
    torch.push_back(best_torch);
  }
  std::printf("training step, %d warm-up + %d timed steps, %d thread(s), best of %d run(s) per side\n\n",
              kWarmupSteps, o.steps, o.threads, o.repeat);
  std::printf("| config | params | threads | salamander tok/s | ms/step | pytorch tok/s | ms/step | ratio |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < runs.size(); ++i) print_row(runs[i], o, ours[i], torch[i]);
  std::printf("\n| config | salamander loss first -> last | pytorch loss first -> last |\n| --- | --- | --- |\n");
  for (size_t i = 0; i < runs.size(); ++i) print_losses(runs[i], ours[i], torch[i]);
  std::printf("\nsalamander ms per step by phase (digests every %d step(s); 0: none)\n\n", o.digest_every);
  std::printf("| config | digest (of the step) | batch | forward+backward | grad norm | adamw | total |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < runs.size(); ++i) print_breakdown(runs[i], parts[i]);
  return 0;
}

// bench_journal.cpp — does the controller keep serving while its journal syncs under disk pressure?
//
// A commit is durable in the journal before any worker hears of it; the sync runs on libuv's thread
// pool, so only the driver's next actions wait for it, never the loop that serves heartbeats and
// the REPL. Under heavy writeback an fdatasync can take hundreds of milliseconds (once 660 ms while
// it still ran on the loop, long enough to miss heartbeats). This bench trains a small job on a
// real loopback mesh of CPU workers with its run directory on disk, and measures, first on a quiet
// disk and then while another process writes 512 MiB files with fdatasync in a loop into the same
// directory:
//   REPL round trip  `return 1` through the controller's loop, back to back (p50, p99, max)
//   steps/s          committed steps per second over the phase
//   slowest sync     the slowest journal sync the controller logged (it logs those over 100 ms)
//   nodes lost       nodes the controller declared dead (none should be: nothing failed)
//
// usage: bench_journal [seconds per phase = 20] [nodes = 3]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <regex>

#include "support/bench_table.h"
#include "support/mesh_harness.h"
#include "core/paths.h"

using namespace sal::test;

namespace {

std::string text_of(const std::string& path) {
  auto t = sal::read_file(path);
  if (!t) throw std::runtime_error(t.error().message());
  return *t;
}

MeshOptions options(int nodes) {
  MeshOptions o;
  o.agents = nodes;
  o.steps = 1'000'000'000;
  o.log_level = "info";
  o.model = "model = { layers = 1, d_model = 32, heads = 2, experts = 4, top_k = 2, seq_len = 16 },";
  o.train = "batch = 8, rebalance_every = 0";
  return o;
}

struct Phase {
  std::vector<double> rtt_ms;
  double steps_per_s = 0;
  double slowest_sync_ms = 0;
  int64_t nodes_lost = 0;
};

int64_t step_of(TestMesh& m) { return m.status()["step"].get<int64_t>(); }

// The slowest "a sync took N ms" in the controller's output after byte `from`.
double slowest_sync(const std::string& log, size_t from) {
  static const std::regex re("a sync took ([0-9]+) ms");
  double worst = 0;
  std::string tail = log.size() > from ? log.substr(from) : "";
  for (std::sregex_iterator it(tail.begin(), tail.end(), re), end; it != end; ++it)
    worst = std::max(worst, std::stod((*it)[1]));
  return worst;
}

int64_t lost_events(TestMesh& m) {
  int64_t n = 0;
  for (const auto& e : m.eval_json("return job.events(1000)"))
    if (e["kind"] == "node_dead") ++n;
  return n;
}

Phase measure(TestMesh& m, double seconds) {
  Phase p;
  const std::string log_path = m.dir + "/controller.out";
  const size_t log_from = text_of(log_path).size();
  const int64_t lost_from = lost_events(m);
  const int64_t step_from = step_of(m);
  const double t0 = now_ms();
  while (now_ms() - t0 < seconds * 1000) {
    double s = now_ms();
    auto r = m.eval("return 1");
    if (!r.ok) throw std::runtime_error("the REPL failed: " + r.error);
    p.rtt_ms.push_back(now_ms() - s);
  }
  p.steps_per_s = double(step_of(m) - step_from) / ((now_ms() - t0) / 1000);
  p.slowest_sync_ms = slowest_sync(text_of(log_path), log_from);
  p.nodes_lost = lost_events(m) - lost_from;
  return p;
}

void print_row(const char* name, const Phase& p) {
  std::printf("| %s | %.2f | %.1f | %.1f | %.0f | %s | %lld |\n", name, percentile(p.rtt_ms, 0.5),
              percentile(p.rtt_ms, 0.99), *std::max_element(p.rtt_ms.begin(), p.rtt_ms.end()), p.steps_per_s,
              p.slowest_sync_ms > 0 ? (std::to_string(int(p.slowest_sync_ms)) + " ms").c_str() : "< 100 ms",
              (long long)p.nodes_lost);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 20;
  int nodes = argc > 2 ? std::atoi(argv[2]) : 3;
  if (!(seconds > 0) || nodes < 2) {
    std::fprintf(stderr, "usage: bench_journal [seconds per phase > 0] [nodes >= 2]\n");
    return 2;
  }
  Phase quiet, loaded;
  try {
    TestMesh m(options(nodes));
    m.start();
    if (!eventually([&] { return step_of(m) > 10; }, 60000)) throw std::runtime_error("training did not start");
    quiet = measure(m, seconds);
    Proc writer = spawn({"sh", "-c",
                         "while :; do dd if=/dev/zero of=" + m.dir +
                             "/ballast bs=1M count=512 conv=fdatasync status=none; rm -f " + m.dir + "/ballast; done"},
                        m.dir + "/writer.out");
    loaded = measure(m, seconds);
    writer.signal(SIGKILL);
    writer.wait(5000);
    std::remove((m.dir + "/ballast").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_journal: %s\n", e.what());
    return 1;
  }
  std::printf("the controller's loop while its journal syncs: %d CPU workers (unconfined), %.0f s a phase, run "
              "directory on disk\n\n", nodes, seconds);
  std::printf("| disk | REPL p50 (ms) | p99 (ms) | max (ms) | steps/s | slowest journal sync | nodes lost |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  print_row("quiet", quiet);
  print_row("writer: 512 MiB files with fdatasync, in a loop", loaded);
  return 0;
}

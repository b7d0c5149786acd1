// bench_connect.cpp — what connecting a plan's data plane costs: N real worker processes connect
// an epoch through the controller's rendezvous store (StoreServer over ZeroMQ, as in a job), over
// Gloo's TCP pairs (the path across hosts) and, as the peer in the same run, over shared memory
// (one host), then tear it down and connect the next — the collective rebuild of every plan switch.
// Each worker times its connects (connect_gloo, rendezvous included); the table gives, per size and
// transport, the p50 and max over the epochs of the slowest worker's connect.
//
// usage: bench_connect [epochs = 10] [sizes = 4,8,16]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "comm/gloo_collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"

using namespace sal;
using namespace sal::comm;
using sal::test::Workers;

namespace {

// One worker: `epochs` connects of `size` ranks under fresh prefixes, each checked by a barrier;
// its report is the connect times in ms, one a line ("FAIL ..." on an error).
std::string worker(int rank, int size, int epochs, bool shared_memory, const std::string& endpoint) {
  zmq::context_t ctx{1};
  StoreClient store(ctx, endpoint);
  std::ostringstream out;
  for (int e = 0; e < epochs; ++e) {
    GlooOptions o;
    o.rank = rank;
    o.size = size;
    o.prefix = "bench-" + std::to_string(e);
    o.connect_timeout_ms = 10000;
    o.op_timeout_ms = 10000;
    o.shared_memory = shared_memory;
    auto c = connect_gloo(o, store);
    if (!c) return "FAIL " + c.error().message() + "\n";
    auto* g = dynamic_cast<GlooCollectives*>(c->get());
    if (!g || !(*c)->barrier().ok()) return "FAIL barrier of epoch " + std::to_string(e) + "\n";
    out << g->connect_ms() << "\n";
  }
  return out.str();
}

// The slowest worker's connect of each epoch.
std::vector<double> slowest_per_epoch(const std::vector<std::string>& reports, int epochs) {
  std::vector<double> slowest(size_t(epochs), 0.0);
  for (const auto& r : reports) {
    if (r.rfind("FAIL", 0) == 0 || r.rfind("DIED", 0) == 0 || r.find("KILLED") != std::string::npos) {
      std::fprintf(stderr, "bench_connect: a worker failed: %s", r.c_str());
      std::exit(1);
    }
    std::istringstream in(r);
    double ms = 0;
    for (int e = 0; e < epochs && in >> ms; ++e) slowest[size_t(e)] = std::max(slowest[size_t(e)], ms);
  }
  return slowest;
}

void measure(int size, int epochs, bool shared_memory) {
  Workers w(size, [=](int rank, const std::string& ep) { return worker(rank, size, epochs, shared_memory, ep); });
  zmq::context_t ctx{1};
  StoreServer server(ctx, "tcp://127.0.0.1:*");
  auto ep = server.start();
  if (!ep) {
    std::fprintf(stderr, "bench_connect: store: %s\n", ep.error().message().c_str());
    std::exit(1);
  }
  w.go(*ep);
  auto t = slowest_per_epoch(w.collect(120000), epochs);
  std::sort(t.begin(), t.end());
  std::printf("| %d | %s | %d | %.1f | %.1f |\n", size, shared_memory ? "shared memory (peer)" : "Gloo TCP", epochs,
              t[t.size() / 2], t.back());
}

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  std::vector<int> sizes{4, 8, 16};
  if (argc > 2) {
    sizes.clear();
    std::istringstream in(argv[2]);
    for (std::string s; std::getline(in, s, ',');) sizes.push_back(std::max(2, std::atoi(s.c_str())));
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("data-plane connect through the rendezvous store, real processes (slowest worker per epoch)\n\n");
  std::printf("| ranks | transport | epochs | p50 (ms) | max (ms) |\n| ---: | --- | ---: | ---: | ---: |\n");
  for (int size : sizes)
    for (bool shm : {false, true}) measure(size, epochs, shm);
  return 0;
}

// test_collectives.cpp — the Gloo data plane with real worker processes on loopback, rendezvousing
// through a real StoreServer: every collective against local arithmetic for 1 to 5 ranks and a
// second epoch in the same processes; bit-identical results across two runs; a stray connection
// into a pair's listening port (found, and the mesh connected again); size mismatches and
// the op timeout as errors on every rank (never a crash or a hang); and the recovery path — a rank
// stalled or SIGKILLed inside a collective, abort() from a control thread, the time until each
// survivor's call returns (printed), then a rebuilt epoch over the survivors with new ranks.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "comm/gloo_collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "core/clock.h"

using namespace sal;
using namespace sal::comm;
using namespace std::chrono_literals;
using sal::test::Report;
using sal::test::Workers;
using sal::test::report_value;

namespace {

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::vector<char> to_bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

// The transport the test's workers connect: UCX shared memory (all ranks are on this host), or
// Gloo's TCP pairs (the path across hosts). Set before the workers fork.
bool g_shared_memory = true;

const char* transport_name() { return g_shared_memory ? "shared memory" : "Gloo TCP"; }

GlooOptions options(int rank, int size, const std::string& prefix, int64_t op_timeout_ms = 5000) {
  GlooOptions o;
  o.rank = rank;
  o.size = size;
  o.prefix = prefix;
  o.connect_timeout_ms = 3000;
  o.op_timeout_ms = op_timeout_ms;
  o.shared_memory = g_shared_memory;
  return o;
}

// A worker's connection to the test's store.
struct Env {
  zmq::context_t zmq{1};
  StoreClient store;
  explicit Env(const std::string& endpoint) : store(zmq, endpoint) {}
};

// Connects and notes the connect time in the report; null on failure (noted as a FAIL).
std::unique_ptr<Collectives> connect(Env& env, const GlooOptions& o, Report& rep, const std::string& label) {
  auto c = connect_gloo(o, env.store);
  if (!c) {
    rep.check(false, label + ": " + c.error().message());
    return nullptr;
  }
  if (auto* g = dynamic_cast<GlooCollectives*>(c->get())) {
    rep.check(o.size == 1 || g->shared_memory() == o.shared_memory, label + ": on the transport asked for");
    rep.note(label + "_connect_ms=" + fmt(g->connect_ms()));
    // on one host the epoch runs over shared memory and has no sockets; over Gloo, one per peer
    rep.check(g->shared_memory() || g->sockets().size() == size_t(o.size - 1), label + ": one tracked socket per peer");
  }
  return std::move(*c);
}

// ---------- the checks each worker runs ----------

template <class T>
void check_allreduce(Collectives& c, size_t n, Report& rep) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(c.rank() * 1000 + int(i % 97));
  auto st = c.allreduce_sum(v.data(), n);
  rep.check(st.ok(), "allreduce " + std::to_string(n) + ": " + (st.ok() ? "" : st.error().message()));
  const int s = c.size();
  for (size_t i = 0; st.ok() && i < n; ++i) {
    T want = T(1000 * s * (s - 1) / 2 + s * int(i % 97));
    if (v[i] != want) {
      rep.check(false, "allreduce " + std::to_string(n) + ": element " + std::to_string(i));
      break;
    }
  }
}

void check_allgather(Collectives& c, Report& rep) {
  const size_t b = 13;
  std::vector<uint8_t> in(b), out(b * size_t(c.size()));
  for (size_t i = 0; i < b; ++i) in[i] = uint8_t(c.rank() * 31 + int(i));
  auto st = c.allgather(in.data(), b, out.data());
  rep.check(st.ok(), "allgather: " + (st.ok() ? "" : st.error().message()));
  for (int r = 0; st.ok() && r < c.size(); ++r) {
    for (size_t i = 0; i < b; ++i) rep.check(out[size_t(r) * b + i] == uint8_t(r * 31 + int(i)), "allgather value");
  }
}

int64_t a2a_count(int s, int d) { return (s + 2 * d) % 4; }  // uneven, with zeros
float a2a_value(int s, int d, int64_t k) { return float(s * 10000 + d * 100 + k); }

void check_alltoallv(Collectives& c, Report& rep, int64_t (*count)(int, int) = a2a_count) {
  const int n = c.size(), me = c.rank();
  std::vector<int64_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  std::vector<float> send, want;
  for (int d = 0; d < n; ++d) {
    sc[size_t(d)] = count(me, d);
    for (int64_t k = 0; k < sc[size_t(d)]; ++k) send.push_back(a2a_value(me, d, k));
  }
  for (int s = 0; s < n; ++s) {
    rc[size_t(s)] = count(s, me);
    for (int64_t k = 0; k < rc[size_t(s)]; ++k) want.push_back(a2a_value(s, me, k));
  }
  std::vector<float> recv(want.size(), -1.0f);
  auto st = c.alltoallv(send.data(), sc, recv.data(), rc);
  rep.check(st.ok(), "alltoallv: " + (st.ok() ? "" : st.error().message()));
  rep.check(!st.ok() || recv == want, "alltoallv values");
}

void check_p2p(Collectives& c, Report& rep) {
  const int n = c.size(), me = c.rank();
  if (n < 2) return;
  // Everyone sends to the next rank and receives from the previous one, at once.
  std::vector<uint8_t> out(1000), in(1000, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(me + int(i));
  int to = (me + 1) % n, from = (me + n - 1) % n;
  auto st = c.exchange({SendSpec{to, out.data(), out.size(), 3}}, {RecvSpec{from, in.data(), in.size(), 3}});
  rep.check(st.ok(), "exchange: " + (st.ok() ? "" : st.error().message()));
  for (size_t i = 0; st.ok() && i < in.size(); ++i) rep.check(in[i] == uint8_t(from + int(i)), "exchange value");
  // Plain send/recv between ranks 0 and 1, including an empty message.
  double x = 0;
  if (me == 0) {
    double pi = 3.14159;
    rep.check(c.send(1, &pi, sizeof pi, 7).ok(), "send 0->1");
    rep.check(c.recv(1, &x, sizeof x, 8).ok(), "recv 1->0");
    rep.check(x == 2.71828, "recv value");
    rep.check(c.send(1, nullptr, 0, 9).ok(), "empty send");
  } else if (me == 1) {
    rep.check(c.recv(0, &x, sizeof x, 7).ok(), "recv 0->1");
    rep.check(x == 3.14159, "send value");
    double e = 2.71828;
    rep.check(c.send(0, &e, sizeof e, 8).ok(), "send 1->0");
    rep.check(c.recv(0, nullptr, 0, 9).ok(), "empty recv");
  }
}

std::string correctness_worker(int rank, int size, const std::string& ep) {
  Report rep;
  Env env(ep);
  for (int epoch = 1; epoch <= 2; ++epoch) {
    std::string label = "epoch" + std::to_string(epoch);
    auto c = connect(env, options(rank, size, "n" + std::to_string(size) + "-epoch-" + std::to_string(epoch)), rep,
                     label);
    if (!c) return rep.text();
    check_allreduce<float>(*c, 1, rep);
    check_allreduce<float>(*c, 262147, rep);
    check_allreduce<double>(*c, 1000, rep);
    if (epoch == 1) {
      check_allreduce<float>(*c, 1000, rep);
      check_allreduce<double>(*c, 3, rep);
      check_allgather(*c, rep);
      check_alltoallv(*c, rep);
      check_p2p(*c, rep);
    }
    rep.check(c->barrier().ok(), "barrier");
  }
  return rep.text();
}

// The controller's side of a test: a real StoreServer, started, and the workers let go with its
// endpoint; `control` is the controller's own client (publishing commands, reading workers' keys).
struct Controller {
  zmq::context_t ctx{1};
  StoreServer server{ctx, "tcp://127.0.0.1:*"};
  std::string endpoint;
  std::unique_ptr<StoreClient> control;
  explicit Controller(Workers& w) {
    auto ep = server.start();
    REQUIRE(ep.ok());
    endpoint = *ep;
    control = std::make_unique<StoreClient>(ctx, endpoint);
    w.go(endpoint);
  }
};

// Reaps the workers and checks every report said OK.
std::vector<std::string> expect_ok(Workers& w, int timeout_ms, const std::vector<int>& skip = {}) {
  auto reports = w.collect(timeout_ms);
  for (size_t r = 0; r < reports.size(); ++r) {
    if (std::find(skip.begin(), skip.end(), int(r)) != skip.end()) continue;
    CAPTURE(r);
    CAPTURE(reports[r]);
    CHECK(reports[r].rfind("OK\n", 0) == 0);
  }
  return reports;
}

uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// Values of very different magnitudes, so any change of summation order changes the bits.
template <class T>
std::vector<T> awkward(int rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(std::sin(double(i) * 0.37 + rank * 1.3) * std::pow(10.0, int((i + size_t(rank)) % 9) - 4));
  return v;
}

std::string determinism_worker(int rank, int size, const std::string& ep, const std::string& prefix) {
  Report rep;
  Env env(ep);
  auto c = connect(env, options(rank, size, prefix), rep, "det");
  if (!c) return rep.text();
  const size_t n = 100003;
  auto f = awkward<float>(rank, n);
  auto d = awkward<double>(rank, n);
  rep.check(c->allreduce_sum(f.data(), n).ok(), "float allreduce");
  rep.check(c->allreduce_sum(d.data(), n).ok(), "double allreduce");
  std::vector<double> want(n, 0.0), mag(n, 0.0);  // a sequential double sum: it is a sum, whatever the order
  for (int r = 0; r < size; ++r) {
    auto x = awkward<float>(r, n);
    for (size_t i = 0; i < n; ++i) {
      want[i] += double(x[i]);
      mag[i] += std::fabs(double(x[i]));
    }
  }
  double worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(f[i]) - want[i]) / (mag[i] + 1e-30));
  rep.check(worst < 1e-5, "float sums close to the sequential sum");
  rep.note("hash_f=" + std::to_string(fnv1a(f.data(), n * sizeof(float))));
  rep.note("hash_d=" + std::to_string(fnv1a(d.data(), n * sizeof(double))));
  return rep.text();
}

// A control thread: waits for the controller's abort key and aborts `c`, recording when.
struct AbortWatcher {
  StoreClient client;
  std::atomic<int64_t> t_abort_ns{0};
  std::thread thread;
  AbortWatcher(Env& env, const std::string& ep, const std::string& key, Collectives& c)
      : client(env.zmq, ep) {
    thread = std::thread([this, key, &c] {
      auto v = client.fetch(key, 8000ms);
      if (!v) return;
      t_abort_ns = mono_ns();
      c.abort("controller says: " + std::string(v->begin(), v->end()));
    });
  }
  ~AbortWatcher() {
    if (thread.joinable()) thread.join();
  }
};

// The rebuilt epoch over the survivors: new rank, new size, new prefix, same store and device.
void rebuild_and_check(Env& env, int new_rank, int new_size, const std::string& prefix, Report& rep) {
  auto c = connect(env, options(new_rank, new_size, prefix), rep, "rebuilt");
  if (!c) return;
  check_allreduce<float>(*c, 100000, rep);
  check_alltoallv(*c, rep);
  rep.check(c->barrier().ok(), "rebuilt barrier");
}

}  // namespace

TEST_CASE("collectives: correct results for 1 to 5 ranks, and a second epoch in the same processes, on both transports") {
  for (bool shm : {true, false}) {
    g_shared_memory = shm;
    CAPTURE(transport_name());
    for (int size = 1; size <= 5; ++size) {
      CAPTURE(size);
      Workers w(size, [size](int rank, const std::string& ep) { return correctness_worker(rank, size, ep); });
      Controller ctl(w);
      auto reports = expect_ok(w, 20000);
      std::printf("collectives (%s): %d rank(s): connect %s ms (epoch 1), %s ms (epoch 2, same device) on rank 0\n", transport_name(), size,
                  report_value(reports[0], "epoch1_connect_ms").c_str(),
                  report_value(reports[0], "epoch2_connect_ms").c_str());
    }
  }
  g_shared_memory = true;
}

TEST_CASE("collectives: allreduce is bit-identical across ranks and across two runs") {
  std::vector<std::string> runs;
  for (int run = 0; run < 2; ++run) {
    std::string prefix = "det-run-" + std::to_string(run);
    Workers w(4, [prefix](int rank, const std::string& ep) { return determinism_worker(rank, 4, ep, prefix); });
    Controller ctl(w);
    auto reports = expect_ok(w, 20000);
    for (const auto& r : reports) {
      CHECK(report_value(r, "hash_f") == report_value(reports[0], "hash_f"));
      CHECK(report_value(r, "hash_d") == report_value(reports[0], "hash_d"));
    }
    runs.push_back(report_value(reports[0], "hash_f") + "/" + report_value(reports[0], "hash_d"));
  }
  CHECK(!runs[0].empty());
  CHECK(runs[0] == runs[1]);
}

TEST_CASE("collectives: size mismatches and op timeouts are errors on every rank, not crashes or hangs, on both transports") {
  for (bool shm : {true, false}) {
    g_shared_memory = shm;
    CAPTURE(transport_name());
    Workers w(3, [](int rank, const std::string& ep) {
      Report rep;
      Env env(ep);
      // 1. A point-to-point size mismatch: the receiver names it, the sender and a bystander fail fast.
      {
        auto c = connect(env, options(rank, 3, "mm-1"), rep, "mm1");
        if (!c) return rep.text();
        std::vector<char> buf(200);
        int64_t t0 = mono_ns();
        Status st;
        if (rank == 0) st = c->send(1, buf.data(), 100, 5);
        if (rank == 1) st = c->recv(0, buf.data(), 200, 5);
        if (rank == 2) st = c->barrier();
        double ms = double(mono_ns() - t0) / 1e6;
        rep.check(!st.ok(), "p2p mismatch is an error");
        if (rank == 1) rep.check(!st.ok() && st.error().message().find("sent 100 bytes") != std::string::npos, "names the sizes");
        rep.check(ms < 2000, "p2p mismatch fails fast (" + fmt(ms) + " ms)");
        rep.check(!c->barrier().ok(), "the epoch is spent afterwards");
        rep.note("p2p_mismatch_ms=" + fmt(ms));
      }
      // 2. alltoallv counts that do not match: every rank gets the same verdict.
      {
        auto c = connect(env, options(rank, 3, "mm-2"), rep, "mm2");
        if (!c) return rep.text();
        std::vector<int64_t> sc = {1, 1, 1}, rc = {1, 1, 1};
        if (rank == 2) rc[0] = 2;
        std::vector<float> s(3, 1.0f), r(4, 0.0f);
        auto st = c->alltoallv(s.data(), sc, r.data(), rc);
        rep.check(!st.ok() && st.error().message().find("rank 0 sends 1 floats to rank 2, which expects 2") !=
                                 std::string::npos,
                  "alltoallv mismatch named: " + (st.ok() ? std::string("ok") : st.error().message()));
      }
      // 3. The op timeout as the backstop: rank 0 waits 200 ms for ranks that come 600 ms late.
      {
        auto c = connect(env, options(rank, 3, "mm-3"), rep, "mm3");
        if (!c) return rep.text();
        int64_t t0 = mono_ns();
        Status st;
        if (rank == 0) {
          ScopedOpTimeout short_wait(*c, 200ms);
          st = c->barrier();
        } else {
          std::this_thread::sleep_for(600ms);
          st = c->barrier();
        }
        double ms = double(mono_ns() - t0) / 1e6;
        rep.check(!st.ok(), "late barrier fails");
        if (rank == 0) {
          rep.check(ms >= 150 && ms < 1500, "timed out after ~200 ms, took " + fmt(ms));
          rep.check(!st.ok() && st.error().message().find("Timed out") != std::string::npos, "says it timed out");
          rep.check(c->op_timeout() == 5000ms, "ScopedOpTimeout restored the timeout");
        }
        rep.note("timeout_ms=" + fmt(ms));
      }
      // 4. abort() with no call in flight: this rank's next call fails at once and says why; the
      //    peers' calls fail fast too (they see the connection close). A rank whose call failed
      //    ends its process at once here; a slower peer still attaching to it over shared memory
      //    then fails its connect instead, naming that rank — as right, and as fast.
      {
        const int64_t c0 = mono_ns();
        auto got = connect_gloo(options(rank, 3, "mm-4"), env.store);
        if (!got) {
          const double ms = double(mono_ns() - c0) / 1e6;
          const std::string why = got.error().message();
          rep.check(rank != 0 && g_shared_memory && why.find("shared memory to rank") != std::string::npos,
                    "mm4: only a peer may fail to connect, to a rank that left: " + why);
          rep.check(ms < 2000, "mm4: the failed connect is fast: " + fmt(ms) + " ms");
          return rep.text();
        }
        auto c = std::move(*got);
        if (rank == 0) c->abort("drill");
        rep.check(c->aborted() == (rank == 0), "aborted() reports the abort");
        int64_t t0 = mono_ns();
        auto st = c->barrier();
        double ms = double(mono_ns() - t0) / 1e6;
        rep.check(!st.ok(), "barrier after abort fails");
        if (rank == 0) {
          rep.check(!st.ok() && st.error().message() == "barrier: epoch 'mm-4' aborted: drill",
                    "names the epoch and the reason: " + (st.ok() ? std::string() : st.error().message()));
        }
        rep.check(ms < 1000, "fails fast: " + fmt(ms) + " ms");
      }
      return rep.text();
    });
    Controller ctl(w);
    auto reports = expect_ok(w, 20000);
    std::printf("errors (%s): p2p size mismatch returned after %s / %s / %s ms; rank 0's 200 ms op timeout fired after %s ms\n", transport_name(),
                report_value(reports[0], "p2p_mismatch_ms").c_str(), report_value(reports[1], "p2p_mismatch_ms").c_str(),
                report_value(reports[2], "p2p_mismatch_ms").c_str(), report_value(reports[0], "timeout_ms").c_str());
  }
  g_shared_memory = true;
}

TEST_CASE("collectives: connect fails with a clear error when a peer never comes") {
  Workers w(1, [](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    auto o = options(rank, 2, "lonely");
    o.connect_timeout_ms = 300;
    int64_t t0 = mono_ns();
    auto c = connect_gloo(o, env.store);
    double ms = double(mono_ns() - t0) / 1e6;
    rep.check(!c.ok(), "connect without the peer fails");
    rep.check(!c.ok() && c.error().message().find("'lonely'") != std::string::npos, "names the epoch");
    rep.check(ms < 3000, "within a few timeouts: " + fmt(ms) + " ms");
    rep.note("lonely_ms=" + fmt(ms));
    if (!c.ok()) rep.note("error=" + c.error().message());
    return rep.text();
  });
  Controller ctl(w);
  auto reports = expect_ok(w, 10000);
  std::printf("connect without the peer (connect timeout 300 ms) failed after %s ms: %s\n",
              report_value(reports[0], "lonely_ms").c_str(), report_value(reports[0], "error").c_str());
}

// The port of rank `rank`'s pair with its `index`-th peer, from the addresses Gloo published under
// "<prefix>/<rank>": one fixed-size record per peer, each starting with the listening sockaddr.
int gloo_pair_port(const std::vector<char>& published, int peers, int index) {
  size_t record = published.size() / size_t(peers);
  sockaddr_storage ss{};
  std::memcpy(&ss, published.data() + record * size_t(index), std::min(record, sizeof ss));
  if (ss.ss_family != AF_INET) return -1;
  return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

// A plain TCP connection to 127.0.0.1:port, as a ZeroMQ socket reconnecting to a port it once knew
// makes; -1 if it could not connect.
int stray_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

TEST_CASE("collectives: a stray connection into a pair's listening port is found, and the ranks connect again together") {
  // Ranks 0 and 1 publish their pairs' addresses and wait for rank 2; before rank 2 comes, a
  // stranger connects to both listening ports meant for it. Gloo accepts the first connection
  // there, whoever makes it, wherever its side of the pair listens (about three times in four),
  // so the first mesh is wrong: the ranks must all see it and connect again, and then compute
  // right. A few rounds, until one had the stranger accepted.
  g_shared_memory = false;
  bool retried = false;
  for (int round = 1; round <= 8 && !retried; ++round) {
    CAPTURE(round);
    const std::string prefix = "stray-" + std::to_string(round);
    Workers w(3, [prefix](int rank, const std::string& ep) {
      Report rep;
      Env env(ep);
      if (rank == 2 && !env.store.fetch("stray-done", 10000ms)) return std::string("FAIL no stray-done\n");
      auto o = options(rank, 3, prefix);
      o.connect_timeout_ms = 1000;
      auto c = connect(env, o, rep, "stray");
      if (!c) return rep.text();
      if (auto* g = dynamic_cast<GlooCollectives*>(c.get())) rep.note("attempts=" + std::to_string(g->connect_attempts()));
      check_allreduce<float>(*c, 1000, rep);
      check_alltoallv(*c, rep);
      rep.check(c->barrier().ok(), "barrier");
      return rep.text();
    });
    Controller ctl(w);
    std::vector<int> strays;
    for (int r = 0; r < 2; ++r) {  // rank 0's and rank 1's pair with rank 2: their second record
      auto published = ctl.control->fetch(prefix + "/" + std::to_string(r), 10000ms);
      REQUIRE(published.ok());
      int port = gloo_pair_port(*published, 2, 1);
      REQUIRE(port > 0);
      strays.push_back(stray_connect(port));
    }
    REQUIRE(ctl.control->put("stray-done", to_bytes("1")).ok());
    auto reports = expect_ok(w, 30000);
    for (int fd : strays)
      if (fd >= 0) ::close(fd);
    std::string attempts = report_value(reports[0], "attempts");
    for (const auto& r : reports) CHECK(report_value(r, "attempts") == attempts);  // together
    std::printf("stray connection, round %d: the mesh connected in %s tries, in %s ms on rank 0\n", round,
                attempts.c_str(), report_value(reports[0], "stray_connect_ms").c_str());
    retried = attempts != "1";
  }
  CHECK(retried);
  g_shared_memory = true;
}

TEST_CASE("abort: survivors blocked by a stalled rank return quickly after abort, then rebuild without it, on both transports") {
  for (bool shm : {true, false}) {
    g_shared_memory = shm;
    CAPTURE(transport_name());
    const int kVictim = 2;
    Workers w(4, [](int rank, const std::string& ep) {
      Report rep;
      Env env(ep);
      auto c = connect(env, options(rank, 4, "stall-1", 10000), rep, "first");
      if (!c) return rep.text();
      check_allreduce<float>(*c, 1000, rep);  // warm-up: everyone is in
      if (rank == kVictim) {
        (void)env.store.put("victim-ready", to_bytes("1"));
        std::this_thread::sleep_for(30s);  // silent but alive; the test kills it
        rep.check(false, "victim was not killed");
        return rep.text();
      }
      double blocked_ms = 0, own_abort_ms = 0;
      int64_t t_ret = 0;
      Status st;
      {
        AbortWatcher watcher(env, ep, "control/abort-stall", *c);
        std::vector<float> big(1 << 20, 1.0f);
        int64_t t_enter = mono_ns();
        st = c->allreduce_sum(big.data(), big.size());
        t_ret = mono_ns();
        (void)env.store.put("released/" + std::to_string(rank), to_bytes("1"));
        blocked_ms = double(t_ret - t_enter) / 1e6;
        if (watcher.thread.joinable()) watcher.thread.join();
        own_abort_ms = double(t_ret - watcher.t_abort_ns.load()) / 1e6;
      }
      // Released by its own abort() ("... aborted: ...") or, a moment earlier, by a peer's abort
      // arriving as EOF (the cascade): either way within a bound of the controller's command.
      rep.check(!st.ok(), "the blocked allreduce fails");
      auto sent = env.store.fetch("control/abort-ns", 5000ms);
      rep.check(sent.ok(), "abort time published");
      double after_command = sent.ok() ? double(t_ret - std::stoll(std::string(sent->begin(), sent->end()))) / 1e6 : -1;
      rep.check(after_command >= 0 && after_command < 500, "released " + fmt(after_command) + " ms after the abort command");
      rep.note("after_command_ms=" + fmt(after_command));
      rep.note("own_abort_ms=" + fmt(own_abort_ms));
      rep.note("blocked_ms=" + fmt(blocked_ms));
      rep.check(!c->barrier().ok(), "later calls fail fast");
      int64_t t0 = mono_ns();
      c.reset();
      rep.note("destroy_ms=" + fmt(double(mono_ns() - t0) / 1e6));
      rebuild_and_check(env, rank < kVictim ? rank : rank - 1, 3, "stall-2", rep);
      return rep.text();
    });
    Controller ctl(w);
    auto& control = *ctl.control;
    REQUIRE(control.fetch("victim-ready", 10000ms).ok());
    std::this_thread::sleep_for(200ms);  // the survivors are blocked in the big allreduce by now
    REQUIRE(control.put("control/abort-ns", to_bytes(std::to_string(mono_ns()))).ok());
    REQUIRE(control.put("control/abort-stall", to_bytes("rank 2 stalled")).ok());
    ctl.server.erase_prefix("stall-1/");  // what the controller does with an old epoch's keys
    CHECK(control.wait_for({"released/0", "released/1", "released/3"}, 10000ms).ok());
    w.kill(kVictim, SIGKILL);
    auto reports = expect_ok(w, 20000, {kVictim});
    CHECK(reports[kVictim].find("DIED") == 0);
    auto v = [&](int r, const char* k) { return report_value(reports[size_t(r)], k); };
    std::printf("abort (%s, stalled rank 2 of 4, 1M-float allreduce): survivors released %s / %s / %s ms after the "
                "controller's abort command, %s / %s / %s ms after their own abort() (negative: a peer's abort got "
                "there first); old context destroyed in %s ms; rebuilt 3-rank epoch connected in %s ms\n",
                transport_name(), v(0, "after_command_ms").c_str(), v(1, "after_command_ms").c_str(), v(3, "after_command_ms").c_str(),
                v(0, "own_abort_ms").c_str(), v(1, "own_abort_ms").c_str(), v(3, "own_abort_ms").c_str(),
                v(0, "destroy_ms").c_str(), v(0, "rebuilt_connect_ms").c_str());
  }
  g_shared_memory = true;
}

namespace {
int64_t busy_count(int s, int d) { return (s + d) % 4 == 3 ? 0 : 150000 + 20000 * ((s * 7 + d * 13) % 5); }
}  // namespace

TEST_CASE("abort: a rank SIGKILLed inside a busy alltoallv, survivors return within a bound, then rebuild, on both transports") {
  for (bool shm : {true, false}) {
    g_shared_memory = shm;
    CAPTURE(transport_name());
    const int kVictim = 1;
    Workers w(4, [](int rank, const std::string& ep) {
      Report rep;
      Env env(ep);
      auto c = connect(env, options(rank, 4, "busy-1", 3000), rep, "first");
      if (!c) return rep.text();
      const int n = 4;
      std::vector<int64_t> sc(n), rc(n);
      size_t ts = 0, tr = 0;
      for (int d = 0; d < n; ++d) ts += size_t(sc[size_t(d)] = busy_count(rank, d));
      for (int s = 0; s < n; ++s) tr += size_t(rc[size_t(s)] = busy_count(s, rank));
      std::vector<float> send(ts, float(rank)), recv(tr);
      AbortWatcher watcher(env, ep, "control/abort-busy", *c);
      Status st;
      int iterations = 0;
      while (iterations < 5000) {
        st = c->alltoallv(send.data(), sc, recv.data(), rc);
        if (!st.ok()) break;
        if (++iterations == 3 && rank == kVictim) (void)env.store.put("busy-started", to_bytes("1"));
      }
      int64_t t_err = mono_ns();
      if (rank == kVictim) return std::string("FAIL the victim's loop ended\n");
      (void)env.store.put("released/" + std::to_string(rank), to_bytes("1"));
      auto kill_ns = env.store.fetch("control/kill-ns", 5000ms);
      if (watcher.thread.joinable()) watcher.thread.join();
      rep.check(!st.ok(), "the loop ended with an error");
      rep.check(kill_ns.ok(), "kill time published");
      if (kill_ns.ok()) {
        double after_kill = double(t_err - std::stoll(std::string(kill_ns->begin(), kill_ns->end()))) / 1e6;
        rep.note("after_kill_ms=" + fmt(after_kill));
        rep.check(after_kill < 1500, "returned " + fmt(after_kill) + " ms after the SIGKILL (op timeout 3000 ms)");
      }
      bool by_abort = !st.ok() && st.error().message().find("aborted") != std::string::npos;
      rep.note(std::string("how=") + (by_abort ? "abort" : "eof"));
      rep.note("iterations=" + std::to_string(iterations));
      c.reset();
      int new_rank = rank < kVictim ? rank : rank - 1;
      rebuild_and_check(env, new_rank, 3, "busy-2", rep);
      return rep.text();
    });
    Controller ctl(w);
    auto& control = *ctl.control;
    REQUIRE(control.fetch("busy-started", 10000ms).ok());
    std::this_thread::sleep_for(20ms);
    int64_t kill_ns = mono_ns();
    w.kill(kVictim, SIGKILL);
    REQUIRE(control.put("control/kill-ns", to_bytes(std::to_string(kill_ns))).ok());
    std::this_thread::sleep_for(50ms);  // the controller's detection delay
    REQUIRE(control.put("control/abort-busy", to_bytes("rank 1 was killed")).ok());
    auto reports = expect_ok(w, 20000, {kVictim});
    std::printf("abort (%s, SIGKILL of rank 1 of 4 in a busy ~2 MB-per-rank alltoallv, abort 50 ms later): survivors "
                "returned %s (%s) / %s (%s) / %s (%s) ms after the kill; rebuilt 3-rank epoch connected in %s ms\n",
                transport_name(), report_value(reports[0], "after_kill_ms").c_str(), report_value(reports[0], "how").c_str(),
                report_value(reports[2], "after_kill_ms").c_str(), report_value(reports[2], "how").c_str(),
                report_value(reports[3], "after_kill_ms").c_str(), report_value(reports[3], "how").c_str(),
                report_value(reports[0], "rebuilt_connect_ms").c_str());
  }
  g_shared_memory = true;
}

// SPARe's patch narrows a plan's standby plane (runtime/standby_plane.h) to the ranks a loss left.
TEST_CASE("narrow: a shared-memory plane of 4, one rank SIGKILLed, narrowed by the 3 left in a new order, computes every collective right") {
  const int kVictim = 1;
  const std::vector<int> kMembers{3, 0, 2};  // new rank 0 is old rank 3, and so on
  Workers w(4, [&](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    auto c = connect(env, options(rank, 4, "standby-7"), rep, "whole");
    if (!c) return rep.text();
    rep.check(c->narrows(), "a shared-memory plane narrows");
    check_allreduce<float>(*c, 1 << 16, rep);  // warm, as the standby is
    (void)env.store.put("warm/" + std::to_string(rank), to_bytes("1"));
    if (rank == kVictim) {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return std::string("FAIL the victim lived on\n");
    }
    rep.check(env.store.fetch("control/killed", 10000ms).ok(), "the victim's death announced");
    auto bad = c->narrow({kVictim}, "bad");  // without this rank: refused, the plane left as it was
    rep.check(!bad.ok() && bad.error().message().find("do not include this rank") != std::string::npos,
              "a member list without this rank: " + (bad.ok() ? std::string("accepted") : bad.error().message()));
    auto n = c->narrow(kMembers, "patch-7");
    rep.check(n.ok(), "narrowed: " + (n.ok() ? std::string() : n.error().message()));
    if (!n.ok()) return rep.text();
    rep.check(c->aborted(), "the whole plane is spent once narrowed");
    rep.check(!c->narrow(kMembers, "again").ok(), "a spent plane does not narrow again");
    const int want = int(std::find(kMembers.begin(), kMembers.end(), rank) - kMembers.begin());
    rep.check((*n)->rank() == want && (*n)->size() == 3,
              "rank " + std::to_string((*n)->rank()) + " of " + std::to_string((*n)->size()) + ", want " +
                  std::to_string(want) + " of 3");
    check_allreduce<float>(**n, 100000, rep);
    check_allreduce<double>(**n, 7, rep);
    check_allgather(**n, rep);
    check_alltoallv(**n, rep);
    check_p2p(**n, rep);
    rep.check((*n)->barrier().ok(), "barrier of the narrowed plane");
    return rep.text();
  });
  Controller ctl(w);
  for (int r = 0; r < 4; ++r) REQUIRE(ctl.control->fetch("warm/" + std::to_string(r), 10000ms).ok());
  w.kill(kVictim, SIGKILL);
  REQUIRE(ctl.control->put("control/killed", to_bytes("1")).ok());
  expect_ok(w, 20000, {kVictim});
}

TEST_CASE("narrow: a plane over Gloo's TCP pairs refuses, naming why") {
  g_shared_memory = false;
  Workers w(2, [](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    auto c = connect(env, options(rank, 2, "tcp-7"), rep, "tcp");
    if (!c) return rep.text();
    rep.check(!c->narrows(), "a TCP plane does not narrow");
    auto n = c->narrow({0, 1}, "patch");
    rep.check(!n.ok() && n.error().message().find("only a plane over shared memory") != std::string::npos,
              "refused: " + (n.ok() ? std::string("accepted") : n.error().message()));
    check_allreduce<float>(*c, 1000, rep);  // and the plane still works
    return rep.text();
  });
  Controller ctl(w);
  expect_ok(w, 20000);
  g_shared_memory = true;
}

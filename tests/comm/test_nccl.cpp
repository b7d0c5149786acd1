// test_nccl.cpp — the NCCL data plane (comm/nccl_collectives.h) on real GPUs, one worker process per
// GPU forked before anything touches CUDA (the parent never does: nccl_main.cpp counts the GPUs in a
// child), rendezvousing through a real StoreServer as the Gloo tests do. On one GPU: a 1-rank
// communicator computes every collective right on device buffers (outputs poisoned first), abort()
// from another thread makes later calls fail fast, and revoke / abort_and_destroy / destroy each end
// an epoch after which a new one is created. With two or more GPUs, also: sums, all-gather,
// all-to-all-v and point-to-point across processes, size mismatches as errors on both sides, shrink
// (plain, and after a revoke), abort of a collective blocked on a late peer, the op timeout, and a
// fresh epoch afterwards. Cases needing more GPUs than the machine has say so and pass.
// Labelled gpu; exits 77 (skipped) without a GPU.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "comm/gpu_probe.h"
#include "comm/nccl_collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "core/clock.h"
#include "kernels/cuda/buffer.h"

using namespace sal;
using namespace sal::comm;
using namespace std::chrono_literals;
using sal::kernels::cuda::Buffer;
using sal::test::Report;
using sal::test::Workers;
using sal::test::report_value;

namespace {

constexpr int kMaxRanks = 8;

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string msg(const Status& st) { return st.ok() ? std::string("ok") : st.error().message(); }

NcclOptions options(int rank, int size, const std::string& prefix) {
  NcclOptions o;
  o.rank = rank;
  o.size = size;
  o.device = rank;  // one rank per GPU
  o.prefix = prefix;
  o.rendezvous_timeout_ms = 20000;
  o.init_timeout_ms = 30000;
  o.op_timeout_ms = 10000;
  o.teardown_timeout_ms = 5000;
  return o;
}

// A worker's connection to the test's store.
struct Env {
  zmq::context_t zmq{1};
  StoreClient store;
  explicit Env(const std::string& endpoint) : store(zmq, endpoint) {}
};

std::unique_ptr<NcclCollectives> connect(Env& env, const NcclOptions& o, Report& rep, const std::string& label) {
  int64_t t0 = mono_ns();
  auto c = connect_nccl_object(o, env.store);
  if (!c) {
    rep.check(false, label + ": " + c.error().message());
    return nullptr;
  }
  rep.note(label + "_connect_ms=" + fmt(double(mono_ns() - t0) / 1e6));
  rep.note(label + "_init_ms=" + fmt((*c)->init_ms()));
  return std::move(*c);
}

// Uploads and waits for the copy: the communicator's stream does not wait for the legacy stream
// that cudaMemcpy uses, and a pageable upload may return before its DMA has landed.
template <class T>
bool upload(Buffer<T>& b, const std::vector<T>& host, Report& rep) {
  auto s = b.upload(host);
  rep.check(s.ok(), "upload: " + s.what());
  rep.check(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize after upload");
  return s.ok();
}

template <class T>
std::vector<T> download(const Buffer<T>& b, Report& rep) {
  std::vector<T> host;
  auto s = b.download(&host);
  rep.check(s.ok(), "download: " + s.what());
  return host;
}

// ---------- the checks each worker runs (values exact: small integers in floats) ----------

template <class T>
void check_allreduce(Collectives& c, size_t n, Report& rep) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(c.rank() * 1000 + int(i % 97));
  Buffer<T> d;
  if (!upload(d, v, rep)) return;
  auto st = c.allreduce_sum(d.get(), n);
  rep.check(st.ok(), "allreduce " + std::to_string(n) + ": " + msg(st));
  if (!st.ok()) return;
  auto got = download(d, rep);
  const int s = c.size();
  for (size_t i = 0; i < n; ++i) {
    T want = T(1000 * s * (s - 1) / 2 + s * int(i % 97));
    if (got.size() != n || got[i] != want) {
      rep.check(false, "allreduce " + std::to_string(n) + ": element " + std::to_string(i));
      return;
    }
  }
}

void check_allgather(Collectives& c, Report& rep) {
  const size_t b = 13;
  std::vector<uint8_t> in(b), poison(b * size_t(c.size()), 0xAB);
  for (size_t i = 0; i < b; ++i) in[i] = uint8_t(c.rank() * 31 + int(i));
  Buffer<uint8_t> din, dout;
  if (!upload(din, in, rep) || !upload(dout, poison, rep)) return;
  auto st = c.allgather(din.get(), b, dout.get());
  rep.check(st.ok(), "allgather: " + msg(st));
  if (!st.ok()) return;
  auto out = download(dout, rep);
  for (int r = 0; r < c.size(); ++r) {
    for (size_t i = 0; i < b; ++i) {
      if (out[size_t(r) * b + i] != uint8_t(r * 31 + int(i))) {
        rep.check(false, "allgather value from rank " + std::to_string(r));
        return;
      }
    }
  }
}

int64_t a2a_count(int s, int d) { return (s + 2 * d) % 4 + (s == d ? 2 : 0); }  // uneven, zeros between peers
float a2a_value(int s, int d, int64_t k) { return float(s * 10000 + d * 100 + k); }

void check_alltoallv(Collectives& c, Report& rep) {
  const int n = c.size(), me = c.rank();
  std::vector<int64_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  std::vector<float> send, want;
  for (int d = 0; d < n; ++d) {
    sc[size_t(d)] = a2a_count(me, d);
    for (int64_t k = 0; k < sc[size_t(d)]; ++k) send.push_back(a2a_value(me, d, k));
  }
  for (int s = 0; s < n; ++s) {
    rc[size_t(s)] = a2a_count(s, me);
    for (int64_t k = 0; k < rc[size_t(s)]; ++k) want.push_back(a2a_value(s, me, k));
  }
  Buffer<float> ds, dr;
  if (!upload(ds, send, rep) || !upload(dr, std::vector<float>(want.size(), -1.0f), rep)) return;
  auto st = c.alltoallv(ds.get(), sc, dr.get(), rc);
  rep.check(st.ok(), "alltoallv: " + msg(st));
  if (st.ok()) rep.check(download(dr, rep) == want, "alltoallv values");
}

void check_p2p(Collectives& c, Report& rep) {
  const int n = c.size(), me = c.rank();
  if (n < 2) return;
  // Everyone sends to the next rank and receives from the previous one, at once.
  std::vector<uint8_t> out(1000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(me + int(i));
  Buffer<uint8_t> dout, din;
  if (!upload(dout, out, rep) || !upload(din, std::vector<uint8_t>(1000, 0), rep)) return;
  int to = (me + 1) % n, from = (me + n - 1) % n;
  auto st = c.exchange({SendSpec{to, dout.get(), 1000, 3}}, {RecvSpec{from, din.get(), 1000, 3}});
  rep.check(st.ok(), "exchange: " + msg(st));
  if (st.ok()) {
    auto in = download(din, rep);
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] != uint8_t(from + int(i))) {
        rep.check(false, "exchange value");
        break;
      }
    }
  }
  // Plain send/recv between ranks 0 and 1, one of them empty, and two tags posted in opposite
  // orders on the two sides (matched by tag).
  Buffer<double> a, b;
  if (!upload(a, std::vector<double>{me == 0 ? 3.14159 : 2.71828}, rep) || !upload(b, std::vector<double>{0.0}, rep)) {
    return;
  }
  if (me == 0) {
    rep.check(c.send(1, a.get(), sizeof(double), 7).ok(), "send 0->1");
    rep.check(c.recv(1, b.get(), sizeof(double), 8).ok(), "recv 1->0");
    rep.check(download(b, rep) == std::vector<double>{2.71828}, "recv value");
    rep.check(c.send(1, nullptr, 0, 9).ok(), "empty send");
  } else if (me == 1) {
    rep.check(c.recv(0, b.get(), sizeof(double), 7).ok(), "recv 0->1");
    rep.check(download(b, rep) == std::vector<double>{3.14159}, "send value");
    rep.check(c.send(0, a.get(), sizeof(double), 8).ok(), "send 1->0");
    rep.check(c.recv(0, nullptr, 0, 9).ok(), "empty recv");
  }
  if (me <= 1) {
    const int peer = 1 - me;
    Buffer<float> x, y, rx, ry;
    float xv = float(me * 10 + 1), yv = float(me * 10 + 2);
    if (!upload(x, std::vector<float>(4, xv), rep) || !upload(y, std::vector<float>(8, yv), rep) ||
        !upload(rx, std::vector<float>(4, 0.0f), rep) || !upload(ry, std::vector<float>(8, 0.0f), rep)) {
      return;
    }
    std::vector<SendSpec> sends = {{peer, x.get(), 16, 21}, {peer, y.get(), 32, 22}};
    std::vector<RecvSpec> recvs = {{peer, ry.get(), 32, 22}, {peer, rx.get(), 16, 21}};
    if (me == 1) std::reverse(sends.begin(), sends.end());
    auto st2 = c.exchange(sends, recvs);
    rep.check(st2.ok(), "exchange by tags: " + msg(st2));
    if (st2.ok()) {
      rep.check(download(rx, rep) == std::vector<float>(4, float(peer * 10 + 1)), "tag 21 value");
      rep.check(download(ry, rep) == std::vector<float>(8, float(peer * 10 + 2)), "tag 22 value");
    }
  }
}

// The controller's side: a real StoreServer, started, and the workers let go with its endpoint.
struct Controller {
  zmq::context_t ctx{1};
  StoreServer server{ctx, "tcp://127.0.0.1:*"};
  std::string endpoint;
  explicit Controller(Workers& w) {
    auto ep = server.start();
    REQUIRE(ep.ok());
    endpoint = *ep;
    w.go(endpoint);
  }
};

std::vector<std::string> expect_ok(Workers& w, int timeout_ms) {
  auto reports = w.collect(timeout_ms);
  for (size_t r = 0; r < reports.size(); ++r) {
    CAPTURE(r);
    CAPTURE(reports[r]);
    CHECK(reports[r].rfind("OK\n", 0) == 0);
  }
  return reports;
}

int gpus() { return std::min(sal::test::probed_gpus().count, kMaxRanks); }

}  // namespace

TEST_CASE("nccl: a 1-rank communicator on GPU 0 computes every collective on device buffers") {
  Workers w(1, [](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    // Two epochs alive at once in one process, then the first one's values again.
    auto c1 = connect(env, options(rank, 1, "one-1"), rep, "epoch1");
    auto c2 = connect(env, options(rank, 1, "one-2"), rep, "epoch2");
    if (!c1 || !c2) return rep.text();
    rep.check(c1->rank() == 0 && c1->size() == 1, "rank and size");
    for (auto* c : {c1.get(), c2.get()}) {
      check_allreduce<float>(*c, 1, rep);
      check_allreduce<float>(*c, 262147, rep);
      check_allreduce<double>(*c, 1000, rep);
      check_allreduce<float>(*c, 0, rep);
      check_allgather(*c, rep);
      check_alltoallv(*c, rep);
      rep.check(c->exchange({}, {}).ok(), "empty exchange");
      rep.check(c->barrier().ok(), "barrier");
      rep.check(!c->aborted() && !c->outstanding_work(), "healthy");
    }
    int64_t t0 = mono_ns();
    auto st = c1->destroy();
    rep.check(st.ok(), "destroy: " + msg(st));
    rep.note("destroy_ms=" + fmt(double(mono_ns() - t0) / 1e6));
    check_allreduce<float>(*c2, 1000, rep);
    return rep.text();
  });
  Controller ctl(w);
  auto reports = expect_ok(w, 120000);
  std::printf("nccl 1 rank: connect %s ms (init %s ms), second epoch %s ms; destroy %s ms\n",
              report_value(reports[0], "epoch1_connect_ms").c_str(), report_value(reports[0], "epoch1_init_ms").c_str(),
              report_value(reports[0], "epoch2_connect_ms").c_str(), report_value(reports[0], "destroy_ms").c_str());
}

TEST_CASE("nccl: abort from another thread makes later calls fail fast, and a failed call spends the epoch") {
  Workers w(1, [](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    auto c = connect(env, options(rank, 1, "abort-1"), rep, "a1");
    if (!c) return rep.text();
    check_allreduce<float>(*c, 1000, rep);
    std::thread control([&] { c->abort("drill"); });
    control.join();
    rep.check(c->aborted(), "aborted() after abort");
    Buffer<float> d;
    upload(d, std::vector<float>(10, 1.0f), rep);
    int64_t t0 = mono_ns();
    auto st = c->barrier();
    double ms = double(mono_ns() - t0) / 1e6;
    rep.check(!st.ok() && st.error().message() == "barrier: epoch 'abort-1' aborted: drill",
              "names the epoch and the reason: " + msg(st));
    rep.check(ms < 50, "fails fast: " + fmt(ms) + " ms");
    rep.check(!c->allreduce_sum(d.get(), 10).ok(), "allreduce after abort fails");
    rep.check(!c->outstanding_work(), "nothing was left running");
    // A new epoch works while the aborted object still exists.
    auto c2 = connect(env, options(rank, 1, "abort-2"), rep, "a2");
    if (!c2) return rep.text();
    check_allreduce<float>(*c2, 1000, rep);
    c.reset();  // the destructor aborts the spent communicator
    rep.check(c2->barrier().ok(), "barrier after the old epoch's destruction");
    // A bad call spends the epoch too, and later calls say why.
    auto bad = c2->alltoallv(d.get(), {1, 1}, d.get(), {1});
    rep.check(!bad.ok() && bad.error().message().find("counts must be size()") != std::string::npos,
              "bad counts rejected: " + msg(bad));
    rep.check(c2->aborted(), "a failed call spends the epoch");
    auto later = c2->barrier();
    rep.check(!later.ok() && later.error().message().find("failed earlier: alltoallv") != std::string::npos,
              "later calls name the failure: " + msg(later));
    // The op timeout setting, scoped.
    {
      ScopedOpTimeout t(*c2, 250ms);
      rep.check(c2->op_timeout() == 250ms, "scoped op timeout");
    }
    rep.check(c2->op_timeout() == 10000ms, "op timeout restored");
    return rep.text();
  });
  Controller ctl(w);
  expect_ok(w, 120000);
}

TEST_CASE("nccl: revoke, abort_and_destroy and destroy each end an epoch, and a new one can be created after each") {
  Workers w(1, [](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    auto timed = [](auto&& f) {
      int64_t t0 = mono_ns();
      auto st = f();
      return std::make_pair(std::move(st), double(mono_ns() - t0) / 1e6);
    };
    {
      auto c = connect(env, options(rank, 1, "life-1"), rep, "l1");
      if (!c) return rep.text();
      check_allreduce<float>(*c, 1000, rep);
      auto [st, ms] = timed([&] { return c->revoke(); });
      rep.check(st.ok(), "revoke: " + msg(st));
      rep.note("revoke_ms=" + fmt(ms));
      rep.check(c->revoked() && c->aborted(), "revoked() and aborted()");
      rep.check(!c->barrier().ok(), "barrier after revoke fails");
      rep.check(c->revoke().ok(), "revoke again is a no-op");
      auto [st2, ms2] = timed([&] { return c->destroy(); });
      rep.check(st2.ok(), "destroy after revoke: " + msg(st2));
      rep.note("destroy_revoked_ms=" + fmt(ms2));
      rep.check(c->destroyed(), "destroyed()");
    }
    {
      auto c = connect(env, options(rank, 1, "life-2"), rep, "l2");
      if (!c) return rep.text();
      check_allreduce<float>(*c, 1000, rep);
      auto [st, ms] = timed([&] { return c->abort_and_destroy(); });
      rep.check(st.ok(), "abort_and_destroy: " + msg(st));
      rep.note("abort_ms=" + fmt(ms));
      rep.check(c->destroyed() && c->aborted(), "destroyed() and aborted()");
      auto b = c->barrier();
      rep.check(!b.ok(), "barrier after abort_and_destroy fails");
      rep.check(c->abort_and_destroy().ok() && c->destroy().ok(), "teardown again is a no-op");
    }
    {
      auto c = connect(env, options(rank, 1, "life-3"), rep, "l3");
      if (!c) return rep.text();
      check_allreduce<float>(*c, 1000, rep);
      auto [st, ms] = timed([&] { return c->destroy(); });
      rep.check(st.ok(), "destroy: " + msg(st));
      rep.note("destroy_ms=" + fmt(ms));
    }
    {
      auto c = connect(env, options(rank, 1, "life-4"), rep, "l4");
      if (!c) return rep.text();
      check_allreduce<float>(*c, 1000, rep);
      auto s1 = c->shrink({0}, "life-4b");
      rep.check(!s1.ok() && s1.error().message().find("this rank is excluded") != std::string::npos,
                "shrink cannot exclude the caller: " + (s1.ok() ? std::string("ok") : s1.error().message()));
      auto s2 = c->shrink({}, "life-4b");
      rep.check(!s2.ok(), "shrink needs a rank to exclude");
      rep.check(!c->aborted(), "a refused shrink leaves the epoch alone");
      check_allreduce<float>(*c, 10, rep);
      // The destructor ends a healthy epoch cleanly.
    }
    auto c = connect(env, options(rank, 1, "life-5"), rep, "l5");
    if (c) check_allreduce<float>(*c, 1000, rep);
    return rep.text();
  });
  Controller ctl(w);
  auto reports = expect_ok(w, 120000);
  std::printf("nccl 1 rank: revoke %s ms (then destroy %s ms), abort %s ms, destroy %s ms\n",
              report_value(reports[0], "revoke_ms").c_str(), report_value(reports[0], "destroy_revoked_ms").c_str(),
              report_value(reports[0], "abort_ms").c_str(), report_value(reports[0], "destroy_ms").c_str());
}

TEST_CASE("nccl: with two or more GPUs, one process per GPU computes every collective and shrinks") {
  const int n = gpus();
  if (n < 2) {
    MESSAGE("skipped: this machine has " << n << " GPU(s); the multi-process case needs 2 or more");
    return;
  }
  Workers w(n, [n](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    {
      auto c = connect(env, options(rank, n, "multi-1"), rep, "m1");
      if (!c) return rep.text();
      check_allreduce<float>(*c, 1, rep);
      check_allreduce<float>(*c, 262147, rep);
      check_allreduce<double>(*c, 1000, rep);
      check_allgather(*c, rep);
      check_alltoallv(*c, rep);
      check_p2p(*c, rep);
      rep.check(c->barrier().ok(), "barrier");
      // Plain shrink of a healthy communicator without the last rank, which waits until the
      // survivors are done before it ends its side.
      if (rank < n - 1) {
        int64_t t0 = mono_ns();
        auto child = c->shrink({n - 1}, "multi-1-shrunk");
        rep.check(child.ok(), "shrink: " + (child.ok() ? std::string("ok") : child.error().message()));
        rep.note("shrink_ms=" + fmt(double(mono_ns() - t0) / 1e6));
        if (child.ok()) {
          rep.check((*child)->rank() == rank && (*child)->size() == n - 1, "shrunk rank and size");
          check_allreduce<float>(**child, 100000, rep);
          rep.check((*child)->destroy().ok(), "destroy the shrunk communicator");
        }
        if (rank == 0) rep.check(env.store.put("multi-1/shrunk", {'1'}).ok(), "publish the shrink's end");
      } else {
        rep.check(env.store.fetch("multi-1/shrunk", 60000ms).ok(), "wait for the survivors");
      }
      rep.check(c->abort_and_destroy().ok(), "abort the parent");
    }
    // A point-to-point size mismatch: an error on both sides, naming the sizes.
    {
      auto c = connect(env, options(rank, n, "multi-mm"), rep, "mm");
      if (!c) return rep.text();
      Buffer<uint8_t> buf;
      upload(buf, std::vector<uint8_t>(200, 1), rep);
      Status st;
      if (rank == 0) st = c->send(1, buf.get(), 100, 5);
      if (rank == 1) st = c->recv(0, buf.get(), 200, 5);
      if (rank <= 1) {
        rep.check(!st.ok(), "p2p size mismatch is an error");
        rep.check(!st.ok() && st.error().message().find("100 bytes") != std::string::npos &&
                      st.error().message().find("200 bytes") != std::string::npos,
                  "names both sizes: " + msg(st));
      }
      rep.check(c->abort_and_destroy().ok(), "abort after the mismatch");
    }
    // Revoke, then shrink (NCCL_SHRINK_DEFAULT after a revoke), then compute on the survivors.
    {
      auto c = connect(env, options(rank, n, "multi-rs"), rep, "rs");
      if (!c) return rep.text();
      rep.check(c->barrier().ok(), "barrier before revoke");
      if (rank < n - 1) {
        rep.check(c->revoke().ok(), "revoke");
        auto child = c->shrink({n - 1}, "multi-rs-shrunk");
        rep.check(child.ok(), "shrink after revoke: " + (child.ok() ? std::string("ok") : child.error().message()));
        if (child.ok()) {
          check_allreduce<float>(**child, 1000, rep);
          check_alltoallv(**child, rep);
          rep.check((*child)->destroy().ok(), "destroy the shrunk communicator");
        }
        rep.check(c->destroy().ok(), "destroy the revoked parent");
        if (rank == 0) rep.check(env.store.put("multi-rs/shrunk", {'1'}).ok(), "publish the shrink's end");
      } else {
        rep.check(env.store.fetch("multi-rs/shrunk", 60000ms).ok(), "wait for the survivors");
        rep.check(c->abort_and_destroy().ok(), "the excluded rank aborts");
      }
    }
    return rep.text();
  });
  Controller ctl(w);
  auto reports = expect_ok(w, 240000);
  std::printf("nccl %d ranks: connect %s ms (init %s ms), shrink %s ms on rank 0\n", n,
              report_value(reports[0], "m1_connect_ms").c_str(), report_value(reports[0], "m1_init_ms").c_str(),
              report_value(reports[0], "shrink_ms").c_str());
}

TEST_CASE("nccl: with two or more GPUs, abort and the op timeout end collectives blocked on a late peer") {
  const int n = gpus();
  if (n < 2) {
    MESSAGE("skipped: this machine has " << n << " GPU(s); a blocked collective needs 2 or more");
    return;
  }
  Workers w(n, [n](int rank, const std::string& ep) {
    Report rep;
    Env env(ep);
    {
      auto c = connect(env, options(rank, n, "hang-1"), rep, "h1");
      if (!c) return rep.text();
      if (rank == 0) {
        // Blocked in a barrier that rank 1 joins only much later; a control thread aborts it.
        std::atomic<int64_t> t_abort{0};
        std::thread control([&] {
          std::this_thread::sleep_for(300ms);
          t_abort = mono_ns();
          c->abort("drill");
        });
        auto st = c->barrier();
        int64_t t_ret = mono_ns();
        control.join();
        double ms = double(t_ret - t_abort.load()) / 1e6;
        rep.check(!st.ok() && st.error().message().find("aborted: drill") != std::string::npos,
                  "blocked barrier fails with the abort: " + msg(st));
        rep.check(ms < 100, "returns quickly after abort: " + fmt(ms) + " ms");
        rep.note("abort_return_ms=" + fmt(ms));
        rep.check(c->outstanding_work(), "its kernel may still run");
      } else {
        // Rank 1 comes after rank 0 gave up; the others wait from the start. All end by the op
        // timeout or by an NCCL error, never by hanging.
        if (rank == 1) std::this_thread::sleep_for(1500ms);
        int64_t t0 = mono_ns();
        ScopedOpTimeout t(*c, rank == 1 ? 1000ms : 3000ms);
        auto st = c->barrier();
        double ms = double(mono_ns() - t0) / 1e6;
        rep.check(!st.ok(), "barrier without rank 0 fails");
        rep.check(ms < 4000, "within the op timeout: " + fmt(ms) + " ms");
        rep.note("timeout_ms=" + fmt(ms));
        rep.note("error=" + msg(st));
      }
      int64_t t0 = mono_ns();
      auto st = c->abort_and_destroy();
      rep.check(st.ok(), "abort_and_destroy with a hung kernel: " + msg(st));
      rep.note("abort_ms=" + fmt(double(mono_ns() - t0) / 1e6));
    }
    // A fresh epoch over every rank works.
    auto c = connect(env, options(rank, n, "hang-2"), rep, "h2");
    if (!c) return rep.text();
    check_allreduce<float>(*c, 100000, rep);
    check_alltoallv(*c, rep);
    rep.check(c->destroy().ok(), "destroy");
    return rep.text();
  });
  Controller ctl(w);
  auto reports = expect_ok(w, 240000);
  std::printf("nccl %d ranks: blocked barrier returned %s ms after abort; rank 1's 1000 ms op timeout fired after %s ms "
              "(%s); abort_and_destroy with a hung kernel %s ms\n",
              n, report_value(reports[0], "abort_return_ms").c_str(), report_value(reports[1], "timeout_ms").c_str(),
              report_value(reports[1], "error").c_str(), report_value(reports[0], "abort_ms").c_str());
}

// test_standby.cpp — the standby plane a SPARe patch narrows (runtime/standby_plane.h), in real
// worker processes over a real store: StandbyPlane connects and warms in the background and
// hands the plane over once; patch_plane narrows it where every rank of the patch holds one, and
// connects a plane of its own on every rank where one rank does not.
#include <doctest/doctest.h>

#include <thread>

#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "runtime/standby_plane.h"

using namespace std::chrono_literals;
using namespace sal;
using sal::test::Report;
using sal::test::Workers;

namespace standby_test {

constexpr int kRanks = 4;

comm::GlooOptions options(int rank, int size, const std::string& prefix) {
  comm::GlooOptions o;
  o.rank = rank, o.size = size, o.prefix = prefix;
  o.connect_timeout_ms = 3000, o.rendezvous_timeout_ms = 5000, o.op_timeout_ms = 5000;
  return o;
}

// The standby of `rank`, taken once warm (null after 10 s).
std::unique_ptr<comm::Collectives> warm_standby(zmq::context_t& zmq, const std::string& ep, int rank) {
  runtime::StandbyPlane s(options(rank, kRanks, "standby-1"), std::make_unique<comm::StoreClient>(zmq, ep), 1 << 12);
  for (int i = 0; i < 1000; ++i) {
    if (auto plane = s.take()) return plane;
    std::this_thread::sleep_for(10ms);
  }
  return nullptr;
}

// Ranks 0, 2 and 3 (rank 1 left out: the patch's ranks, in the standby's order 3, 0, 2 the new
// ranks 0, 1, 2) make the patch's plane; `without` (if >= 0) holds no standby.
std::string patch_worker(int rank, const std::string& ep, int without) {
  Report rep;
  zmq::context_t zmq{1};
  comm::StoreClient store(zmq, ep);
  auto standby = warm_standby(zmq, ep, rank);
  rep.check(standby != nullptr, "the standby was warm and taken");
  if (!standby) return rep.text();
  if (rank == 1) return rep.text();  // the lost rank takes no part
  if (rank == without) standby.reset();
  const std::vector<int> members{3, 0, 2};
  const int me = int(std::find(members.begin(), members.end(), rank) - members.begin());
  auto p = runtime::patch_plane(members, options(me, 3, "plan-1/patch-9-1"), store, std::move(standby));
  rep.check(p.ok(), "the patch's plane: " + (p.ok() ? std::string() : p.error().message()));
  if (!p.ok()) return rep.text();
  rep.check(p->standby == (without < 0), std::string("the standby narrowed: ") + (p->standby ? "yes" : "no"));
  rep.check(p->plane->rank() == me && p->plane->size() == 3, "rank " + std::to_string(p->plane->rank()) + " of " +
                                                                  std::to_string(p->plane->size()));
  std::vector<float> v(1000, float(p->plane->rank() + 1));
  auto st = p->plane->allreduce_sum(v.data(), v.size());
  rep.check(st.ok() && v[0] == 6.0f && v[999] == 6.0f, "allreduce over the patch's plane: " +
                                                           (st.ok() ? std::to_string(v[0]) : st.error().message()));
  return rep.text();
}

void run(int without) {
  Workers w(kRanks, [without](int rank, const std::string& ep) { return patch_worker(rank, ep, without); });
  zmq::context_t ctx{1};
  comm::StoreServer server{ctx, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  w.go(*ep);
  auto reports = w.collect(30000);
  for (size_t r = 0; r < reports.size(); ++r) {
    CAPTURE(r);
    CAPTURE(reports[r]);
    CHECK(reports[r].rfind("OK\n", 0) == 0);
  }
}

TEST_CASE("standby plane: warmed in the background, narrowed by a patch of three ranks of four in a new order") {
  run(-1);
}

TEST_CASE("standby plane: one rank of the patch without it, and every rank connects a plane of its own") {
  run(2);
}

TEST_CASE("standby plane: stopped while its rendezvous waits for a rank that never comes, it ends at once") {
  zmq::context_t ctx{1};
  comm::StoreServer server{ctx, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  runtime::StandbyYard yard;
  auto s = std::make_unique<runtime::StandbyPlane>(options(0, 2, "standby-2"),
                                                   std::make_unique<comm::StoreClient>(ctx, *ep), 64);
  std::this_thread::sleep_for(50ms);
  CHECK(s->take() == nullptr);  // rank 1 never comes: not connected
  CHECK(s->live());
  auto* raw = s.get();
  const auto t0 = std::chrono::steady_clock::now();
  yard.retire(std::move(s), "the test stops it");
  for (int i = 0; i < 100 && !raw->finished(); ++i) std::this_thread::sleep_for(10ms);
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(raw->finished());
  CHECK(waited < 500ms);  // the 5 s rendezvous was interrupted
  yard.reap();
}

}  // namespace standby_test

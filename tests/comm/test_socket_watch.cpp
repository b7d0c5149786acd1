// test_socket_watch.cpp — the mesh judgement of socket_watch.h as pure logic: every rank's report
// of its sockets in, the sockets each rank keeps (and which rank each leads to) or the problem out.
// A whole mesh, a pair that accepted a stranger, a pair joined twice, a rank whose connect failed,
// a rank's own ZeroMQ socket among its candidates, and the reports' round trip through the store's
// bytes. The same judgement over real processes and a real stray connection is in test_collectives.
#include <doctest/doctest.h>

#include "comm/socket_watch.h"

using namespace sal::comm;

namespace {

// Three ranks on loopback, each pair joined by one socket: rank i's end of the pair with j is
// port 1000 * (i + 1) + j.
std::vector<MeshReport> whole_mesh() {
  auto ep = [](int i, int j) { return "127.0.0.1:" + std::to_string(1000 * (i + 1) + j); };
  std::vector<MeshReport> r(3);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      if (i != j) r[size_t(i)].sockets.emplace_back(ep(i, j), ep(j, i));
    }
  }
  return r;
}

}  // namespace

TEST_CASE("mesh judgement: a whole mesh keeps one socket per peer, each leading to its rank") {
  auto v = judge_mesh(whole_mesh());
  CHECK(v.ok());
  CHECK(v.peer_rank == std::vector<std::vector<int>>{{1, 2}, {0, 2}, {0, 1}});
}

TEST_CASE("mesh judgement: a stranger among a rank's candidates is dropped, the mesh still whole") {
  auto r = whole_mesh();
  r[1].sockets.emplace_back("127.0.0.1:5555", "127.0.0.1:6000");  // its store client's socket
  auto v = judge_mesh(r);
  CHECK(v.ok());
  CHECK(v.peer_rank[1] == std::vector<int>{0, 2, -1});
}

TEST_CASE("mesh judgement: a pair whose listener accepted someone else is found, on every rank's reading") {
  auto r = whole_mesh();
  r[0].sockets[1].second = "127.0.0.1:47000";  // rank 0's pair with 2 accepted a stray connection
  r[2].sockets.erase(r[2].sockets.begin());    // and rank 2's connect to it was reset
  auto v = judge_mesh(r);
  CHECK_FALSE(v.ok());
  CHECK(v.problem == "rank 0 has 0 sockets to rank 2 (expected 1: a pair connected to someone else, or twice)");
  CHECK(v.peer_rank[0] == std::vector<int>{1, -1});
}

TEST_CASE("mesh judgement: two sockets joining one pair, or a rank's failed connect, are problems") {
  auto twice = whole_mesh();
  twice[0].sockets.emplace_back("127.0.0.1:9001", "127.0.0.1:9002");
  twice[1].sockets.emplace_back("127.0.0.1:9002", "127.0.0.1:9001");
  CHECK(judge_mesh(twice).problem.find("rank 0 has 2 sockets to rank 1") == 0);

  auto failed = whole_mesh();
  failed[2] = MeshReport{"connect [127.0.0.1]:1003: Connection refused", {}};
  CHECK(judge_mesh(failed).problem == "rank 2's connect failed: connect [127.0.0.1]:1003: Connection refused");

  auto self = whole_mesh();  // a socket from a rank to itself leads nowhere
  self[0].sockets.emplace_back("127.0.0.1:7000", "127.0.0.1:7001");
  self[0].sockets.emplace_back("127.0.0.1:7001", "127.0.0.1:7000");
  auto v = judge_mesh(self);
  CHECK(v.ok());
  CHECK(v.peer_rank[0] == std::vector<int>{1, 2, -1, -1});
}

TEST_CASE("mesh reports round-trip through their bytes, and junk lines are skipped") {
  MeshReport r{"", {{"127.0.0.1:1", "127.0.0.1:2"}, {"[::1]:3", "[::1]:4"}}};
  auto back = decode_mesh_report(encode_mesh_report(r));
  CHECK(back.error.empty());
  CHECK(back.sockets == r.sockets);
  auto failed = decode_mesh_report(encode_mesh_report(MeshReport{"timed out", {}}));
  CHECK(failed.error == "timed out");
  CHECK(failed.sockets.empty());
  std::string junk = "noseparator\n 127.0.0.1:1\n127.0.0.1:1 \n127.0.0.1:5 127.0.0.1:6\n";
  auto j = decode_mesh_report(std::vector<char>(junk.begin(), junk.end()));
  CHECK(j.sockets == std::vector<std::pair<std::string, std::string>>{{"127.0.0.1:5", "127.0.0.1:6"}});
}

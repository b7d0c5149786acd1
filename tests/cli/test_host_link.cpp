// test_host_link.cpp — the line protocol between `salamander run` and the controller it hosts:
// requests round-trip, malformed lines are refused with the rule, and the host's listener reads
// requests off a real pipe however the writes are split.
#include <doctest/doctest.h>

#include <unistd.h>
#include <uv.h>

#include <vector>

#include "cli/host_link.h"

using namespace sal;
using namespace sal::cli;

TEST_CASE("host requests round-trip and malformed ones name the rule") {
  for (HostRequest r : {HostRequest{HostRequest::Kind::add, 3, ""}, HostRequest{HostRequest::Kind::restart, 2500, ""},
                        HostRequest{HostRequest::Kind::cut, 4000, "node2"}}) {
    auto back = decode_host_request(encode_host_request(r));
    REQUIRE(back.ok());
    CHECK(back->kind == r.kind);
    CHECK(back->value == r.value);
    CHECK(back->node == r.node);
  }
  CHECK(encode_host_request({HostRequest::Kind::cut, 1500, "node1"}) == "cut node1 1500");
  CHECK(encode_host_request({HostRequest::Kind::restart, 1000, ""}) == "restart 1000");
  CHECK(decode_host_request("stop 1").error().message() ==
        "host request 'stop 1': expected 'add N', 'restart MS' or 'cut NODE MS'");
  CHECK(decode_host_request("cut 100").error().message() == "host request 'cut 100': a node or a number is missing");
  CHECK(decode_host_request("add 1 2").error().message() == "host request 'add 1 2': too many words");
  CHECK(decode_host_request("add").error().message() == "host request 'add': a number is missing");
  CHECK(decode_host_request("add -2").error().message() == "host request 'add -2': expected a non-negative integer");
  CHECK(decode_host_request("restart 5x").error().message() == "host request 'restart 5x': expected a non-negative integer");
}

TEST_CASE("the host's listener reads each request off a pipe, whole lines only") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::vector<Result<HostRequest>> got;
  {
    HostListener listener(&loop, [&](Result<HostRequest> r) { got.push_back(std::move(r)); });
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    REQUIRE(listener.start(fds[0]).ok());
    REQUIRE(send_host_request(fds[1], {HostRequest::Kind::add, 2, ""}).ok());
    REQUIRE(::write(fds[1], "resta", 5) == 5);  // a line split across writes
    for (int i = 0; i < 5; ++i) uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(got.size() == 1);
    REQUIRE(::write(fds[1], "rt 700\nbogus\n", 13) == 13);
    for (int i = 0; i < 5 && got.size() < 3; ++i) uv_run(&loop, UV_RUN_NOWAIT);
    ::close(fds[1]);
    REQUIRE(got.size() == 3);
    CHECK(got[0]->kind == HostRequest::Kind::add);
    CHECK(got[0]->value == 2);
    CHECK(got[1]->kind == HostRequest::Kind::restart);
    CHECK(got[1]->value == 700);
    CHECK_FALSE(got[2].ok());
  }
  uv_run(&loop, UV_RUN_NOWAIT);  // the listener's handle closes
  CHECK(uv_loop_close(&loop) == 0);
}

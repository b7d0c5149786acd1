// test_zmq_uv.cpp — the ZeroMQ-on-libuv adapter under the edge-triggered ZMQ_FD trap: a ROUTER on
// the loop echoes 1000 pings from a DEALER in another thread (a naive handler stalls after one),
// and messages that arrive while the loop sends from a timer are not lost.
#include <doctest/doctest.h>

#include <thread>

#include "mesh/endpoint.h"
#include "mesh/timer.h"
#include "mesh/zmq_uv.h"

using namespace sal::mesh;

TEST_CASE("a ROUTER on the loop echoes 1000 messages without stalling") {
  zmq::context_t ctx(1);
  uv_loop_t loop;
  uv_loop_init(&loop);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind("tcp://127.0.0.1:*");
  std::string ep = router.get(zmq::sockopt::last_endpoint);
  int echoed = 0;
  {
    ZmqWatcher w(&loop, router, [&] {
      std::vector<zmq::message_t> parts;
      if (!recv_now(router, parts)) return;
      (void)zmq::send_multipart(router, parts);  // the send itself may consume the fd's edge
      if (++echoed == 1000) uv_stop(&loop);
    });
    Timer guard(&loop);
    guard.start(10000, 0, [&] { uv_stop(&loop); });
    std::thread client([&] {
      zmq::socket_t d(ctx, zmq::socket_type::dealer);
      d.connect(ep);
      for (int i = 0; i < 1000; ++i) {
        d.send(zmq::buffer(std::to_string(i)));
        zmq::message_t m;
        REQUIRE(d.recv(m).has_value());
      }
    });
    uv_run(&loop, UV_RUN_DEFAULT);
    client.join();
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
  CHECK(echoed == 1000);
}

TEST_CASE("a burst sent while the loop is busy is fully delivered") {
  zmq::context_t ctx(1);
  uv_loop_t loop;
  uv_loop_init(&loop);
  zmq::socket_t pull(ctx, zmq::socket_type::pull);
  pull.set(zmq::sockopt::rcvhwm, 0);
  pull.bind("inproc://burst");
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::sndhwm, 0);  // the whole burst is queued before the loop runs
  push.connect("inproc://burst");
  int got = 0;
  {
    ZmqWatcher w(&loop, pull, [&] {
      zmq::message_t m;
      if (pull.recv(m, zmq::recv_flags::dontwait)) ++got;
      if (got == 5000) uv_stop(&loop);
    });
    for (int i = 0; i < 5000; ++i) push.send(zmq::str_buffer("x"));
    Timer guard(&loop);
    guard.start(10000, 0, [&] { uv_stop(&loop); });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
  CHECK(got == 5000);
}

TEST_CASE("loopback endpoints are recognised") {
  CHECK(is_local_endpoint("tcp://127.0.0.1:5000"));
  CHECK(is_local_endpoint("tcp://127.1.2.3:*"));
  CHECK(is_local_endpoint("tcp://localhost:1"));
  CHECK(is_local_endpoint("tcp://[::1]:1"));
  CHECK(is_local_endpoint("ipc:///tmp/x"));
  CHECK_FALSE(is_local_endpoint("tcp://0.0.0.0:5000"));
  CHECK_FALSE(is_local_endpoint("tcp://10.0.0.1:5000"));
  CHECK_FALSE(is_local_endpoint("tcp://*:5000"));
  CHECK_FALSE(is_local_endpoint("tcp://eth0:5000"));
}

// t0200_bad_input.cpp — hostile input on every endpoint: garbage frames, wrong protocol versions,
// unknown types, bad msgpack, fields of the wrong type, impostor node ids, oversized messages,
// non-ZMTP bytes and floods. Each gets an error reply or is dropped with a log line, and the
// controller keeps answering the REPL with every node alive.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msgpack.hpp>
#include <zmq_addon.hpp>

#include "support/loopback.h"
#include "support/mesh_harness.h"
#include "support/run_files.h"
#include "wire/codec.h"

using namespace sal;
using namespace sal::test;

namespace {

// Sends `frames` from a fresh DEALER and returns the decoded ErrorReply (code, message), or
// code 0 when nothing came back within the timeout.
std::pair<int, std::string> send_bad(const std::string& ep, wire::Parts frames, int timeout_ms = 1000) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(ep);
  (void)zmq::send_multipart(s, frames);
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return {0, ""};
  wire::Parts reply;
  (void)zmq::recv_multipart(s, std::back_inserter(reply));
  auto env = wire::open(reply);
  if (!env) return {-1, env.error().message()};
  auto err = wire::decode<wire::ErrorReply>(*env);
  if (!err) return {-2, err.error().message()};
  return {err->code, err->message};
}

wire::Parts frames(std::initializer_list<std::string> parts) {
  wire::Parts p;
  for (auto& s : parts) p.emplace_back(s.data(), s.size());
  return p;
}

std::string header(uint16_t type, uint8_t version = wire::kProtocolVersion) {
  auto h = wire::header_frame(wire::MsgType(type), version);
  return h.to_string();
}

std::string packed_heartbeat_with_string_id() {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(3);
  pk.pack(std::string("seven"));
  pk.pack(1);
  pk.pack_array(0);
  return std::string(b.data(), b.size());
}

void send_raw_tcp(const std::string& ep, const std::string& bytes) {
  int fd = connect_loopback(std::stoi(ep.substr(ep.rfind(':') + 1)));
  REQUIRE(fd >= 0);
  (void)!write(fd, bytes.data(), bytes.size());
  char buf[256];
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (read(fd, buf, sizeof buf) > 0) {
  }
  close(fd);
}

void check_still_healthy(TestMesh& m) {
  CHECK(m.controller.running());
  auto s = m.status();
  CHECK(s["nodes"]["alive"] == 4);
  CHECK(s["nodes"]["dead"] == 0);
}

}  // namespace

TEST_CASE("t0200-bad-input: every bad message on the mesh endpoint gets an error reply") {
  TestMesh m;
  m.start();
  using E = wire::ErrorCode;
  auto r = send_bad(m.mesh_ep, frames({"garbage"}));
  CHECK(r.first == int(E::malformed));
  CHECK(r.second.find("expected 2 frames") != std::string::npos);

  const uint8_t next = wire::kProtocolVersion + 1;  // a version this build does not speak
  r = send_bad(m.mesh_ep, frames({header(3, next), std::string("\x90", 1)}));
  CHECK(r.first == int(E::bad_version));
  CHECK(r.second.find("protocol version " + std::to_string(next) + " not supported") != std::string::npos);

  r = send_bad(m.mesh_ep, frames({header(777), std::string("\x90", 1)}));
  CHECK(r.first == int(E::malformed));
  CHECK(r.second.find("unknown message type 777") != std::string::npos);

  r = send_bad(m.mesh_ep, frames({header(3), std::string("\xc1\xc1", 2)}));
  CHECK(r.second.find("not msgpack") != std::string::npos);

  r = send_bad(m.mesh_ep, frames({header(3), packed_heartbeat_with_string_id()}));
  CHECK(r.second == "Heartbeat.node_id: expected uint, got str");

  // An impostor: a well-formed heartbeat for a live node, from another connection.
  r = send_bad(m.mesh_ep, wire::encode(wire::Heartbeat{0, 1, {}}));
  CHECK(r.first == int(E::unknown_node));
  CHECK(r.second.find("belongs to another connection") != std::string::npos);

  r = send_bad(m.mesh_ep, wire::encode(wire::ReplEval{1, "job.kill(0)", wire::ValueFormat::text}));
  CHECK(r.first == int(E::bad_request));
  CHECK(r.second.find("not accepted on the mesh endpoint") != std::string::npos);

  check_still_healthy(m);
  std::string log = m.controller.output();
  CHECK(log.find("mesh: rejected message from 127.0.0.1") != std::string::npos);
}

TEST_CASE("t0201-bad-input: oversized messages and non-ZMTP bytes are dropped with a log line") {
  TestMesh m;
  m.start();
  // 9 MiB body: over ZMQ_MAXMSGSIZE (8 MiB); libzmq drops the connection, nothing is buffered.
  auto r = send_bad(m.mesh_ep, frames({header(3), std::string(9u << 20, 'x')}), 800);
  CHECK(r.first == 0);
  r = send_bad(m.repl_ep, frames({header(42), std::string(9u << 20, 'x')}), 800);
  CHECK(r.first == 0);
  send_raw_tcp(m.mesh_ep, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  send_raw_tcp(m.repl_ep, std::string(64, '\xff') + "not zmtp at all");
  check_still_healthy(m);
  CHECK(eventually([&] {
    std::string log = m.controller.output();
    return log.find("closed before registering") != std::string::npos &&
           log.find("failed its handshake") != std::string::npos;
  }, 2000, 20));
}

TEST_CASE("t0202-bad-input: the REPL endpoint refuses bad frames and oversized chunks") {
  TestMesh m;
  m.start();
  auto r = send_bad(m.repl_ep, frames({"x", "y", "z"}));
  CHECK(r.first == int(wire::ErrorCode::malformed));
  r = send_bad(m.repl_ep, frames({header(42, 0), std::string("\x90", 1)}));
  CHECK(r.first == int(wire::ErrorCode::bad_version));
  r = send_bad(m.repl_ep, wire::encode(wire::Heartbeat{1, 1, {}}));
  CHECK(r.second.find("not accepted on the REPL endpoint") != std::string::npos);
  // A chunk over the 1 MiB bound: refused by the decoder, naming the field.
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(3);
  pk.pack(1);
  pk.pack(std::string((1u << 20) + 1, ' '));
  pk.pack(0);
  r = send_bad(m.repl_ep, frames({header(42), std::string(b.data(), b.size())}));
  CHECK(r.second.find("ReplEval.chunk: string of 1048577 bytes exceeds 1048576") != std::string::npos);
  check_still_healthy(m);
}

TEST_CASE("t0203-bad-input: a flood of garbage is survived, answered, and logged once per kind") {
  TestMesh m;
  m.start();
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(m.mesh_ep);
  for (int i = 0; i < 5000; ++i) (void)zmq::send_multipart(s, frames({header(3), "\xc1"}));
  int replies = 0;
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  while (replies < 5000 && zmq::poll(&item, 1, std::chrono::milliseconds(2000)) > 0) {
    wire::Parts p;
    (void)zmq::recv_multipart(s, std::back_inserter(p));
    ++replies;
  }
  CHECK(replies == 5000);
  check_still_healthy(m);
  std::string log = m.controller.output();
  CHECK(occurrences(log, "mesh: rejected message") == 1);  // 5 000 of one kind within its quiet 10 s
}

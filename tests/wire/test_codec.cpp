// test_codec.cpp — the protocol codec: round trips, and every kind of bad input is refused with a
// message naming what is wrong.
#include <doctest/doctest.h>

#include <msgpack.hpp>

#include <fstream>

#include "wire/codec.h"

using namespace sal;
using namespace sal::wire;

namespace {

Parts frames(MsgType t, const std::string& body, uint8_t version = kProtocolVersion) {
  Parts p;
  p.push_back(header_frame(t, version));
  p.emplace_back(body.data(), body.size());
  return p;
}

template <class... T>
std::string pack(const T&... fields) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(sizeof...(T));
  (pk.pack(fields), ...);
  return std::string(buf.data(), buf.size());
}

}  // namespace

TEST_CASE("a heartbeat with workers round-trips") {
  Heartbeat hb{7, 42, {{0, "cpu:0", 1234, WorkerState::ready}, {1, "cpu:1", 1235, WorkerState::starting}}};
  auto env = open(encode(hb));
  REQUIRE(env.ok());
  CHECK(env->type == MsgType::heartbeat);
  auto back = decode<Heartbeat>(*env);
  REQUIRE(back.ok());
  CHECK(back->node_id == 7);
  CHECK(back->seq == 42);
  REQUIRE(back->workers.size() == 2);
  CHECK(back->workers[1].device == "cpu:1");
  CHECK(back->workers[1].state == WorkerState::starting);
}

TEST_CASE("a plan update carries the typed plan as it is, and names a bad field by its path") {
  PlanUpdate u;
  u.epoch = 3, u.step = 40, u.my_rank = 1, u.ranks = {{0, 0}, {4, 1}};
  u.plan.version = 7, u.plan.nodes = 2, u.plan.slots = 2, u.plan.experts = 3, u.plan.floor = 1;
  u.plan.layers = {{{2, 1, 1}, {{0, 1}, {0, 2}}}, {{1, 2, 1}, {{1, 2}, {0, 1}}}};
  u.plan.schedule = {2, 3, {{0, 4}, {1, 2, 3}}};
  u.plan.stacks.redundancy = 2, u.plan.stacks.hosts = {{0, 1}, {1, 0}}, u.plan.stacks.alive = {true, false};
  u.plan.stacks.assignment = {{0, 1}, {}};
  u.plan.domains = {1, 0};
  u.plan.racks = {0, 0};
  u.transfers = {{3, 1, 2, 0, 1}};
  u.store = "tcp://127.0.0.1:5000";
  u.restore = true, u.restore_dir = "/run/snapshots/step-40";
  auto back = decode<PlanUpdate>(*open(encode(u)));
  REQUIRE(back.ok());
  CHECK(back->number() == 7);
  CHECK(back->plan.layers[1].placement == u.plan.layers[1].placement);
  CHECK(back->plan.layers[0].replicas == u.plan.layers[0].replicas);
  CHECK(back->plan.schedule.slots == u.plan.schedule.slots);
  CHECK(back->plan.schedule.period == 3);
  CHECK(back->plan.stacks.alive == std::vector<bool>{true, false});
  CHECK(back->plan.stacks.assignment == u.plan.stacks.assignment);
  CHECK(back->plan.domains == u.plan.domains);
  CHECK(back->plan.racks == u.plan.racks);
  CHECK(back->ranks[1].node == 4);
  CHECK(back->restore_dir == u.restore_dir);
  // a slot that is not an expert id is named down to the slot
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(11);
  pk.pack(7), pk.pack(1), pk.pack(1), pk.pack(2), pk.pack(1);
  pk.pack_array(1);                                   // layers
  pk.pack_array(2), pk.pack(std::vector<uint32_t>{1, 1});
  pk.pack_array(1), pk.pack_array(1), pk.pack("x");   // placement[0][0] = "x"
  pk.pack_array(3), pk.pack(1), pk.pack(1), pk.pack_array(0);  // schedule
  pk.pack_array(5), pk.pack(1), pk.pack_array(0), pk.pack_array(0), pk.pack_array(0), pk.pack(false);  // stacks
  pk.pack_array(0);                                   // groups
  pk.pack_array(0);                                   // domains
  pk.pack_array(0);                                   // racks
  std::string plan(buf.data(), buf.size());
  msgpack::sbuffer body;
  msgpack::packer<msgpack::sbuffer> pb(body);
  pb.pack_array(23);
  pb.pack(1), pb.pack(0), pb.pack(0), pb.pack_array(0);
  body.write(plan.data(), plan.size());
  pb.pack_array(0), pb.pack(""), pb.pack(false), pb.pack("");
  pb.pack_array(0), pb.pack_array(0), pb.pack(0), pb.pack(-1), pb.pack_array(0);  // sparse snapshots in peers
  pb.pack(false);                                                                  // restore_keeps
  pb.pack(0);                                                                      // keep_planes_of
  pb.pack(-1), pb.pack_array(0), pb.pack(0), pb.pack_array(0), pb.pack(0), pb.pack_array(0);  // rebuild of lost experts
  pb.pack(false);                                                                  // relaunch
  auto bad = decode<PlanUpdate>(*open(frames(MsgType::plan_update, std::string(body.data(), body.size()))));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "PlanUpdate.plan.layers[0].placement[0][0]: expected uint, got str");
}

TEST_CASE("every REPL message round-trips") {
  auto env = open(encode(ReplEval{9, "return job.status()", ValueFormat::json}));
  REQUIRE(env.ok());
  auto e = decode<ReplEval>(*env);
  REQUIRE(e.ok());
  CHECK(e->chunk == "return job.status()");
  CHECK(e->format == ValueFormat::json);
  auto bye = open(encode(ReplBye{}));
  REQUIRE(bye.ok());
  CHECK(decode<ReplBye>(*bye).ok());
}

TEST_CASE("wrong frame counts and headers are malformed") {
  Parts one;
  one.emplace_back(std::string("hello"));
  auto r = open(one);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == int(ErrorCode::malformed));
  Parts bad_header;
  bad_header.emplace_back(std::string("XYZ\x01\x00\x03", 6));
  bad_header.emplace_back(std::string("\x90", 1));
  CHECK(open(bad_header).error().message().find("not a Salamander header") != std::string::npos);
}

TEST_CASE("a different protocol version is named as such") {
  const int other = kProtocolVersion + 1;
  auto r = open(frames(MsgType::heartbeat, pack(1u, 2u), uint8_t(other)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == int(ErrorCode::bad_version));
  CHECK(r.error().message().find("protocol version " + std::to_string(other) + " not supported") != std::string::npos);
}

TEST_CASE("unknown message types are refused") {
  auto r = open(frames(MsgType(999), pack(1u)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("unknown message type 999") != std::string::npos);
}

TEST_CASE("bodies that are not msgpack, truncated, or followed by junk are refused") {
  CHECK(open(frames(MsgType::heartbeat, std::string("\xc1", 1))).error().message().find("not msgpack") != std::string::npos);
  std::string good = pack(1u, 2u, std::vector<int>{});
  CHECK(open(frames(MsgType::heartbeat, good.substr(0, good.size() - 1))).error().message().find("truncated") != std::string::npos);
  CHECK(open(frames(MsgType::heartbeat, good + "xx")).error().message().find("2 trailing bytes") != std::string::npos);
}

TEST_CASE("allocation bombs are stopped by limits before allocating") {
  // array32 header claiming 4G elements, map32 claiming 4G pairs, deep nesting
  CHECK_FALSE(open(frames(MsgType::heartbeat, std::string("\xdd\xff\xff\xff\xff", 5))).ok());
  CHECK_FALSE(open(frames(MsgType::heartbeat, std::string("\xdf\xff\xff\xff\xff", 5))).ok());
  CHECK(open(frames(MsgType::heartbeat, std::string(100000, '\x91'))).error().message().find("size limit") != std::string::npos);
}

TEST_CASE("field errors name the message, the field path and the rule") {
  // Heartbeat{node_id: "x", ...}
  auto env = open(frames(MsgType::heartbeat, pack(std::string("x"), 2u, std::vector<int>{})));
  REQUIRE(env.ok());
  auto r = decode<Heartbeat>(*env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "Heartbeat.node_id: expected uint, got str");

  // a worker whose pid is negative
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(1u);
  pk.pack(2u);
  pk.pack_array(1);
  pk.pack_array(5);
  pk.pack(0u);
  pk.pack(std::string("cpu:0"));
  pk.pack(-5);
  pk.pack(1u);
  pk.pack_array(4);  // held: plan, steps, pending, pending_epoch
  pk.pack(0u);
  pk.pack(0u);
  pk.pack(-1);
  pk.pack(0u);
  auto env2 = open(frames(MsgType::heartbeat, std::string(buf.data(), buf.size())));
  REQUIRE(env2.ok());
  CHECK(decode<Heartbeat>(*env2).error().message() == "Heartbeat.workers[0].pid: expected uint, got negative -5");
}

TEST_CASE("field counts, enum ranges, integer ranges and string bounds are checked") {
  auto few = open(frames(MsgType::ping, pack(1u, 2u)));
  CHECK(decode<Ping>(*few).error().message() == "Ping: expected 3 fields, got 2");
  auto verb = open(frames(MsgType::command, pack(7u, std::string("x"))));
  CHECK(decode<Command>(*verb).error().message().find("Command.verb: enum value 7 out of range") == 0);
  auto big = open(frames(MsgType::welcome, pack(uint64_t(1) << 40, 1u, 100u, 3u, std::string("j"), 30000u,
                                                std::vector<std::string>{}, 3u)));
  CHECK(decode<Welcome>(*big).error().message().find("Welcome.node_id: value") == 0);
  auto longname = open(frames(MsgType::goodbye, pack(1u, std::string(kTextMax + 1, 'a'))));
  CHECK(decode<Goodbye>(*longname).error().message().find("exceeds") != std::string::npos);
}

TEST_CASE("decoding as the wrong type is refused") {
  auto env = open(encode(Ping{1, 2, 3}));
  REQUIRE(env.ok());
  CHECK_FALSE(decode<Heartbeat>(*env).ok());
}

TEST_CASE("docs/protocol.md names every message type with its number") {
  std::ifstream in(std::string(SAL_SOURCE_DIR) + "/docs/protocol.md");
  std::string doc((std::istreambuf_iterator<char>(in)), {});
  REQUIRE_FALSE(doc.empty());
  int listed = 0;
  for (uint16_t t = 0; t < 200; ++t) {
    if (!known_type(t)) continue;
    std::string row = "| " + std::to_string(t) + " | " + std::string(type_name(MsgType(t))) + " |";
    CAPTURE(row);
    CHECK(doc.find(row) != std::string::npos);
    ++listed;
  }
  CHECK(listed == 32);
}

// test_store.cpp — the rendezvous store as Gloo and the controller use it: set/get/wait over a real
// ZeroMQ ROUTER on loopback, a get that waits for a later set, timeouts that name the missing keys,
// the limits (key and value size, key count, total bytes), erase_prefix failing parked requests,
// interrupt(), and hostile input: malformed, wrong-version, truncated and oversized requests get an
// error reply (or a dropped connection) while the server keeps serving everyone else.
#include <doctest/doctest.h>

#include <zmq_addon.hpp>

#include <atomic>
#include <thread>

#include "comm/store_client.h"
#include "comm/store_server.h"
#include "core/clock.h"

using namespace sal;
using namespace sal::comm;
using namespace std::chrono_literals;

namespace {

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }
std::string text(const std::vector<char>& v) { return std::string(v.begin(), v.end()); }

struct Fixture {
  zmq::context_t ctx{1};
  StoreServer server;
  std::string endpoint;
  explicit Fixture(StoreServerOptions o = {}) : server(ctx, "tcp://127.0.0.1:*", std::move(o)) {
    auto ep = server.start();
    REQUIRE(ep.ok());
    endpoint = *ep;
  }
};

// A raw DEALER that sends hand-made frames and returns the decoded reply.
struct Raw {
  zmq::socket_t s;
  Raw(zmq::context_t& ctx, const std::string& ep) : s(ctx, zmq::socket_type::dealer) {
    s.set(zmq::sockopt::linger, 0);
    s.connect(ep);
  }
  void send(std::vector<std::string> frames) {
    std::vector<zmq::message_t> m;
    for (auto& f : frames) m.emplace_back(f.data(), f.size());
    REQUIRE(zmq::send_multipart(s, m).has_value());
  }
  // The decoded reply, or an Error when none came within timeout.
  Result<StoreReply> reply(int timeout_ms = 2000) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms));
    if (!(item.revents & ZMQ_POLLIN)) return fail("no reply");
    std::vector<zmq::message_t> parts;
    (void)zmq::recv_multipart(s, std::back_inserter(parts));
    return decode_reply(parts, StoreLimits{});
  }
};

std::string header(uint8_t version = kStoreVersion) { return std::string("SKV") + char(version); }
std::string byte(uint8_t b) { return std::string(1, char(b)); }
std::string be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(v >> (56 - 8 * i));
  return s;
}
std::string be32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[size_t(i)] = char(v >> (24 - 8 * i));
  return s;
}

}  // namespace

TEST_CASE("store: set then get returns the value, and a get waits for a later set") {
  Fixture f;
  StoreClient a(f.ctx, f.endpoint);
  REQUIRE(a.put("epoch-1/x", bytes("hello")).ok());
  auto v = a.fetch("epoch-1/x", 1000ms);
  REQUIRE(v.ok());
  CHECK(text(*v) == "hello");
  REQUIRE(a.put("epoch-1/empty", {}).ok());  // empty values are allowed (Gloo's FileStore refuses them)
  CHECK(a.fetch("epoch-1/empty", 100ms)->empty());

  std::thread later([&] {
    StoreClient b(f.ctx, f.endpoint);
    std::this_thread::sleep_for(100ms);
    CHECK(b.put("epoch-1/late", bytes("now")).ok());
  });
  int64_t t0 = mono_ms();
  auto late = a.fetch("epoch-1/late", 3000ms);
  int64_t waited = mono_ms() - t0;
  later.join();
  REQUIRE(late.ok());
  CHECK(text(*late) == "now");
  CHECK(waited >= 80);
  CHECK(waited < 1500);  // answered when set, not at the deadline
  std::printf("store: get answered %lld ms after it was asked, the key was set at ~100 ms\n", (long long)waited);

  // The Gloo face: set/get/wait(keys) over the same connection.
  gloo::rendezvous::Store& gs = a;
  gs.set("g/1", bytes("one"));
  gs.wait({"g/1", "epoch-1/x"}, 500ms);
  CHECK(text(gs.get("g/1")) == "one");
  CHECK(f.server.key_count() == 4);
}

TEST_CASE("store: timeouts name the missing keys, and the Gloo face throws StoreError") {
  Fixture f;
  StoreClient a(f.ctx, f.endpoint);
  int64_t t0 = mono_ms();
  auto v = a.fetch("nope", 150ms);
  int64_t waited = mono_ms() - t0;
  REQUIRE(!v.ok());
  CHECK(StoreCode(v.error().code()) == StoreCode::timeout);
  CHECK(v.error().message().find("'nope'") != std::string::npos);
  CHECK(waited >= 140);
  CHECK(waited < 1000);

  REQUIRE(a.put("have", bytes("1")).ok());
  auto w = a.wait_for({"have", "missing"}, 100ms);
  REQUIRE(!w.ok());
  const std::string& m = w.error().message();
  auto tail = m.find("timed out waiting for 'missing'");
  REQUIRE(tail != std::string::npos);
  CHECK(m.find("'have'", tail) == std::string::npos);  // only the missing key is named

  gloo::rendezvous::Store& gs = a;
  bool threw = false;
  try {
    gs.wait({"missing"}, 50ms);
  } catch (const StoreError& e) {
    threw = true;
    CHECK(e.code == StoreCode::timeout);
  }
  CHECK(threw);

  // A server that is gone: the client gives up after the deadline plus the grace period.
  StoreClientOptions o;
  o.reply_grace = 100ms;
  o.timeout = 100ms;
  StoreClient nowhere(f.ctx, "tcp://127.0.0.1:1", o);
  auto u = nowhere.fetch("k", 100ms);
  REQUIRE(!u.ok());
  CHECK(StoreCode(u.error().code()) == StoreCode::unreachable);
}

TEST_CASE("store: limits on key and value size, key count and total bytes give clear errors") {
  StoreServerOptions so;
  so.limits.max_keys = 3;
  so.limits.max_total_bytes = 100;
  Fixture f(so);
  StoreClientOptions co;
  co.limits = so.limits;
  StoreClient a(f.ctx, f.endpoint, co);

  auto big_key = a.put(std::string(1025, 'k'), bytes("v"));
  REQUIRE(!big_key.ok());
  CHECK(StoreCode(big_key.error().code()) == StoreCode::too_large);
  CHECK(big_key.error().message().find("limit 1024") != std::string::npos);
  auto big_value = a.put("k", std::vector<char>((1 << 20) + 1, 'x'));
  REQUIRE(!big_value.ok());
  CHECK(big_value.error().message().find("limit 1048576") != std::string::npos);

  CHECK(a.put("e1/a", bytes("1")).ok());
  CHECK(a.put("e1/b", bytes("2")).ok());
  CHECK(a.put("e2/a", bytes("3")).ok());
  CHECK(a.put("e2/a", bytes("4")).ok());  // replacing a key is not a new key
  auto full = a.put("e2/b", bytes("5"));
  REQUIRE(!full.ok());
  CHECK(StoreCode(full.error().code()) == StoreCode::full);
  CHECK(full.error().message().find("3 keys") != std::string::npos);

  f.server.erase_prefix("e1/");
  CHECK(f.server.key_count() == 1);
  CHECK(a.put("e2/b", bytes("5")).ok());
  auto bytes_full = a.put("e2/c", std::vector<char>(200, 'x'));
  REQUIRE(!bytes_full.ok());
  CHECK(bytes_full.error().message().find("bytes held") != std::string::npos);
}

TEST_CASE("store: erase_prefix fails requests parked on the erased epoch, interrupt stops a blocked get") {
  Fixture f;
  StoreClient a(f.ctx, f.endpoint);
  std::atomic<int64_t> t_erase{0};
  std::thread eraser([&] {
    std::this_thread::sleep_for(80ms);
    t_erase = mono_ms();
    f.server.erase_prefix("epoch-3/");
  });
  auto v = a.fetch("epoch-3/rank_1", 5000ms);
  int64_t released = mono_ms() - t_erase.load();
  eraser.join();
  REQUIRE(!v.ok());
  CHECK(StoreCode(v.error().code()) == StoreCode::erased);
  CHECK(released < 500);

  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    a.interrupt();
  });
  int64_t t0 = mono_ms();
  auto w = a.fetch("never", 5000ms);
  stopper.join();
  REQUIRE(!w.ok());
  CHECK(StoreCode(w.error().code()) == StoreCode::interrupted);
  CHECK(mono_ms() - t0 < 1000);
  CHECK(!a.put("x", bytes("1")).ok());  // stays interrupted ...
  a.clear_interrupt();
  CHECK(a.put("x", bytes("1")).ok());  // ... until cleared
}

TEST_CASE("store: a closed prefix refuses every later request at once, and other prefixes are served") {
  Fixture f;
  StoreClient a(f.ctx, f.endpoint);
  REQUIRE(a.put("plan-8/rank_0", bytes("x")).ok());
  f.server.close_prefix("plan-8/");
  CHECK(f.server.key_count() == 0);
  // a worker that comes to plan 8's rendezvous after the controller abandoned it: refused now,
  // not after its timeout
  int64_t t0 = mono_ms();
  auto late = a.fetch("plan-8/rank_1", 5000ms);
  REQUIRE(!late.ok());
  CHECK(StoreCode(late.error().code()) == StoreCode::erased);
  CHECK(late.error().message().find("'plan-8/' is closed") != std::string::npos);
  CHECK(mono_ms() - t0 < 1000);
  auto set = a.put("plan-8/rank_2", bytes("y"));
  REQUIRE(!set.ok());
  CHECK(StoreCode(set.error().code()) == StoreCode::erased);
  CHECK(f.server.key_count() == 0);
  // plan-80 and plan-9 are other plans
  CHECK(a.put("plan-80/rank_0", bytes("z")).ok());
  CHECK(a.put("plan-9/rank_0", bytes("z")).ok());
  CHECK(text(*a.fetch("plan-9/rank_0", 1000ms)) == "z");
}

TEST_CASE("store: malformed requests get error replies and the server keeps serving") {
  Fixture f;
  Raw raw(f.ctx, f.endpoint);
  struct Case {
    const char* name;
    std::vector<std::string> frames;
    StoreCode code;
    uint64_t id;
  };
  std::vector<Case> cases = {
      {"one frame", {"garbage"}, StoreCode::malformed, 0},
      {"bad magic", {"XYZ\x01", byte(1), be64(7), "k", "v"}, StoreCode::malformed, 0},
      {"other version", {header(9), byte(1), be64(8), "k", "v"}, StoreCode::bad_version, 0},
      {"short id", {header(), byte(1), "1234", "k", "v"}, StoreCode::malformed, 0},
      {"unknown verb", {header(), byte(0x42), be64(9), "k"}, StoreCode::malformed, 9},
      {"reply verb as request", {header(), byte(0x81), be64(10)}, StoreCode::malformed, 10},
      {"set without value", {header(), byte(1), be64(11), "k"}, StoreCode::malformed, 11},
      {"set with extra frame", {header(), byte(1), be64(12), "k", "v", "x"}, StoreCode::malformed, 12},
      {"empty key", {header(), byte(1), be64(13), "", "v"}, StoreCode::malformed, 13},
      {"key too long", {header(), byte(1), be64(14), std::string(2000, 'k'), "v"}, StoreCode::too_large, 14},
      {"get with 3-byte timeout", {header(), byte(2), be64(15), "k", "abc"}, StoreCode::malformed, 15},
      {"wait without keys", {header(), byte(3), be64(16), be32(10)}, StoreCode::malformed, 16},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    raw.send(c.frames);
    auto r = raw.reply();
    REQUIRE(r.ok());
    CHECK(r->verb == Verb::error);
    CHECK(r->code == c.code);
    CHECK(r->id == c.id);
    CHECK(!r->message.empty());
  }
  // Too many frames: drained, not stored, answered.
  std::vector<std::string> many = {header(), byte(3), be64(17), be32(10)};
  for (int i = 0; i < 5000; ++i) many.push_back("k" + std::to_string(i));
  raw.send(many);
  auto r = raw.reply();
  REQUIRE(r.ok());
  CHECK(r->code == StoreCode::too_large);

  // A frame over ZMQ_MAXMSGSIZE: libzmq drops that connection before buffering it; others are fine.
  Raw hostile(f.ctx, f.endpoint);
  hostile.send({header(), byte(1), be64(18), "k", std::string((1 << 20) + 1000, 'x')});
  CHECK(!hostile.reply(300).ok());

  // The well-formed path still works for everyone.
  raw.send({header(), byte(1), be64(19), "k", "v"});
  auto ok = raw.reply();
  REQUIRE(ok.ok());
  CHECK(ok->verb == Verb::ok);
  CHECK(ok->id == 19);
  StoreClient a(f.ctx, f.endpoint);
  auto v = a.fetch("k", 500ms);
  REQUIRE(v.ok());
  CHECK(text(*v) == "v");
}

TEST_CASE("store: the protocol round-trips and the decoder rejects replies it cannot trust") {
  StoreRequest q;
  q.verb = Verb::wait;
  q.id = 0x0102030405060708ull;
  q.keys = {"a", "b/c"};
  q.timeout_ms = 1234;
  auto back = decode_request(encode_request(q), StoreLimits{});
  REQUIRE(back.ok());
  CHECK(back->verb == Verb::wait);
  CHECK(back->id == q.id);
  CHECK(back->keys == q.keys);
  CHECK(back->timeout_ms == 1234);

  auto e = decode_reply(encode_reply(error_reply(5, StoreCode::full, "store full")), StoreLimits{});
  REQUIRE(e.ok());
  CHECK(e->code == StoreCode::full);
  CHECK(e->message == "store full");

  Frames bad = encode_reply(error_reply(5, StoreCode::full, "x"));
  bad.pop_back();
  CHECK(!decode_reply(bad, StoreLimits{}).ok());
  CHECK(!check_request(StoreRequest{Verb::wait, 1, {}, {}, 0}, StoreLimits{}).ok());
}

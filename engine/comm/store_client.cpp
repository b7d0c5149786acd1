// store_client.cpp — see store_client.h. Every call is: check the request against the limits, send
// it with a fresh id, then poll in short slices (so interrupt() is seen) until the reply with that
// id arrives or the deadline passes.
#include "comm/store_client.h"

#include <algorithm>
#include <limits>

#include "core/clock.h"

namespace sal::comm {

namespace {

constexpr int64_t kPollSliceMs = 10;

Error coded(StoreCode c, std::string message) { return Error(std::move(message), int(c)); }

uint32_t clamp_ms(std::chrono::milliseconds t) {
  return uint32_t(std::clamp<int64_t>(t.count(), 0, std::numeric_limits<uint32_t>::max()));
}

std::string describe(const StoreRequest& r) {
  std::string first = r.keys.empty() ? std::string() : r.keys[0];
  switch (r.verb) {
    case Verb::set: return "set '" + first + "'";
    case Verb::get: return "get '" + first + "'";
    default: break;
  }
  std::string s = "wait for " + std::to_string(r.keys.size()) + " key(s) ('" + first + "'";
  return s + (r.keys.size() > 1 ? ", ...)" : ")");
}

[[noreturn]] void throw_error(const Error& e) { throw StoreError(e.message(), StoreCode(e.code())); }

}  // namespace

StoreClient::StoreClient(zmq::context_t& ctx, std::string endpoint, StoreClientOptions options)
    : ctx_(ctx), endpoint_(std::move(endpoint)), opt_(std::move(options)) {}

StoreClient::~StoreClient() = default;

Status StoreClient::ensure_socket() {
  if (sock_) return ok_status();
  try {
    auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::maxmsgsize, store_max_frame(opt_.limits));
    s->set(zmq::sockopt::linger, 0);
    if (opt_.configure) SAL_TRY(opt_.configure(*s));
    s->connect(endpoint_);
    sock_ = std::move(s);
  } catch (const zmq::error_t& e) {
    return coded(StoreCode::unreachable, "cannot connect to " + endpoint_ + ": " + e.what());
  }
  return ok_status();
}

Result<StoreReply> StoreClient::await_reply(uint64_t id, int64_t deadline_ms) {
  for (;;) {
    if (interrupted_.load()) return coded(StoreCode::interrupted, "interrupted");
    int64_t left = deadline_ms - mono_ms();
    if (left <= 0) return coded(StoreCode::unreachable, "no reply from the store server (is it running?)");
    zmq::pollitem_t item{sock_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(std::min(left, kPollSliceMs)));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return coded(StoreCode::unreachable, "ZeroMQ context terminated");
      continue;
    }
    Frames frames;
    bool truncated = false;
    while (recv_frames(*sock_, frames, 8, &truncated)) {
      if (truncated) continue;
      auto reply = decode_reply(frames, opt_.limits);
      if (!reply) return reply.error().with_context("bad reply from the store server");
      if (reply->id == id) return reply;
      // A late reply to an abandoned request: drop it.
    }
  }
}

Result<StoreReply> StoreClient::call(StoreRequest req, std::chrono::milliseconds server_timeout) {
  const std::string what = "store " + endpoint_ + ": " + describe(req);
  if (interrupted_.load()) return coded(StoreCode::interrupted, what + ": interrupted");
  if (auto st = check_request(req, opt_.limits); !st) return st.error().with_context(what);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto st = ensure_socket(); !st) return st.error().with_context(what);
  req.id = next_id_++;
  req.timeout_ms = clamp_ms(server_timeout);
  Frames frames = encode_request(req);
  if (!send_frames(*sock_, frames)) return coded(StoreCode::unreachable, what + ": send queue full");
  int64_t grace = req.verb == Verb::set ? 0 : opt_.reply_grace.count();
  auto reply = await_reply(req.id, mono_ms() + server_timeout.count() + grace);
  if (!reply) return reply.error().with_context(what);
  if (reply->verb == Verb::error) return coded(reply->code, what + ": " + reply->message);
  return reply;
}

Status StoreClient::put(const std::string& key, const std::vector<char>& value) {
  StoreRequest r;
  r.verb = Verb::set;
  r.keys = {key};
  r.value = value;
  auto reply = call(std::move(r), opt_.timeout);
  if (!reply) return reply.error();
  return ok_status();
}

Result<std::vector<char>> StoreClient::fetch(const std::string& key, std::chrono::milliseconds timeout) {
  StoreRequest r;
  r.verb = Verb::get;
  r.keys = {key};
  auto reply = call(std::move(r), timeout);
  if (!reply) return reply.error();
  if (reply->verb != Verb::value) return coded(StoreCode::malformed, "store get '" + key + "': reply is not a value");
  return std::move(reply->value);
}

Status StoreClient::wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  StoreRequest r;
  r.verb = Verb::wait;
  r.keys = keys;
  auto reply = call(std::move(r), timeout);
  if (!reply) return reply.error();
  return ok_status();
}

void StoreClient::interrupt() { interrupted_.store(true); }
void StoreClient::clear_interrupt() { interrupted_.store(false); }

void StoreClient::set(const std::string& key, const std::vector<char>& data) {
  if (auto st = put(key, data); !st) throw_error(st.error());
}

std::vector<char> StoreClient::get(const std::string& key) {
  auto v = fetch(key, opt_.timeout);
  if (!v) throw_error(v.error());
  return std::move(*v);
}

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, opt_.timeout); }

void StoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  if (auto st = wait_for(keys, timeout); !st) throw_error(st.error());
}

}  // namespace sal::comm

// store_server.cpp — see store_server.h. The server thread owns the ROUTER, the parked requests
// and the inproc control socket (stop / wake); the key map is shared with erase_prefix() and the
// size getters under one mutex. Each request is decoded, answered at once when it can be, parked
// otherwise; parked requests are re-checked when a key is set, expired at their deadline and failed
// when their prefix is erased.
#include "core/lifetime.h"
#include "comm/store_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "core/log.h"

namespace sal::comm {

namespace {

constexpr int kIdlePollMs = 1000;     // poll slice when nothing is parked
constexpr int kDrainPerWake = 256;    // requests handled before the thread looks at deadlines again

std::atomic<uint64_t> g_server_seq{0};

bool has_prefix(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

}  // namespace

struct StoreServer::Impl {
  // A request parked until its keys exist or its deadline passes.
  struct Waiter {
    std::string route;  // ROUTER routing id
    uint64_t id = 0;
    Verb verb = Verb::get;
    std::vector<std::string> keys;
    int64_t deadline_ms = 0;
  };
  zmq::context_t& ctx;
  std::string bind_endpoint;
  StoreServerOptions opt;
  std::string endpoint;
  std::string ctl_endpoint;

  // Shared with other threads.
  mutable std::mutex mu;
  std::map<std::string, std::vector<char>> data;
  size_t total = 0;
  std::vector<std::string> erased;  // prefixes erased since the thread last looked
  std::deque<std::string> closed;   // prefixes closed for good (close_prefix), oldest first
  std::mutex ctl_mu;
  std::unique_ptr<zmq::socket_t> ctl_send;
  std::thread thread;

  // Owned by the server thread once it runs.
  std::unique_ptr<zmq::socket_t> router;
  std::unique_ptr<zmq::socket_t> ctl_recv;
  std::vector<Waiter> waiters;
  KindLog bad_log;

  Impl(zmq::context_t& c, std::string ep, StoreServerOptions o)
      : ctx(c), bind_endpoint(std::move(ep)), opt(std::move(o)) {}

  Status open_sockets();
  void run();
  void handle(const std::string& route, const Frames& frames, bool truncated);
  void reply(const std::string& route, const StoreReply& r);
  void handle_set(const std::string& route, StoreRequest& r);
  void handle_get_or_wait(const std::string& route, StoreRequest& r);
  bool all_present(const std::vector<std::string>& keys, std::vector<char>* first_value) const;
  void answer(const Waiter& w);
  void wake_waiters(const std::string& key);
  void expire_waiters();
  void fail_erased();
  // The closed prefix one of `keys` falls under ("": none).
  std::string closed_prefix(const std::vector<std::string>& keys) const;
  void fail_all(StoreCode code, const std::string& why);
  int poll_timeout_ms() const;
  void log_bad(const char* kind, const std::string& what);
  void wake(const char* what);
};

Status StoreServer::Impl::open_sockets() {
  try {
    router = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::router);
    router->set(zmq::sockopt::maxmsgsize, store_max_frame(opt.limits));
    router->set(zmq::sockopt::linger, 0);
    router->set(zmq::sockopt::sndhwm, 10000);
    if (opt.configure) {
      if (auto st = opt.configure(*router); !st) {
        router.reset();
        return st.error().with_context("store server: configuring the socket");
      }
    }
    router->bind(bind_endpoint);
    endpoint = router->get(zmq::sockopt::last_endpoint);
    ctl_endpoint = "inproc://sal-store-ctl-" + std::to_string(++g_server_seq);
    ctl_recv = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair);
    ctl_recv->bind(ctl_endpoint);
    ctl_send = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair);
    ctl_send->set(zmq::sockopt::linger, 0);
    ctl_send->connect(ctl_endpoint);
  } catch (const zmq::error_t& e) {
    router.reset();
    ctl_recv.reset();
    ctl_send.reset();
    return fail("store server: cannot bind ", bind_endpoint, ": ", e.what());
  }
  return ok_status();
}

// Logged once per kind (core/log.h), so a flood of bad requests is a line, not a line per request.
void StoreServer::Impl::log_bad(const char* kind, const std::string& what) {
  uint64_t suppressed = 0;
  if (bad_log.allow(kind, mono_ns(), suppressed))
    spdlog::warn("store: bad request: {}{}", what, KindLog::more(suppressed));
}

void StoreServer::Impl::wake(const char* what) {
  std::lock_guard<std::mutex> lock(ctl_mu);
  if (!ctl_send) return;
  try {
    (void)ctl_send->send(zmq::buffer(std::string(what)), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // The thread polls at least every kIdlePollMs, so a lost wake-up only delays.
  }
}

void StoreServer::Impl::reply(const std::string& route, const StoreReply& r) {
  Frames f;
  f.emplace_back(route.data(), route.size());
  for (auto& m : encode_reply(r)) f.push_back(std::move(m));
  (void)send_frames(*router, f);  // a peer that is gone or not reading loses its reply
}

int StoreServer::Impl::poll_timeout_ms() const {
  int64_t next = mono_ms() + kIdlePollMs;
  for (const auto& w : waiters) next = std::min(next, w.deadline_ms);
  return int(std::clamp<int64_t>(next - mono_ms(), 0, kIdlePollMs));
}

void StoreServer::Impl::run() {
  for (;;) {
    zmq::pollitem_t items[2] = {{router->handle(), 0, ZMQ_POLLIN, 0}, {ctl_recv->handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(poll_timeout_ms()));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      continue;  // EINTR
    }
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t m;
      bool stop = false;
      while (ctl_recv->recv(m, zmq::recv_flags::dontwait)) stop = stop || m.to_string() == "stop";
      if (stop) break;
    }
    Frames frames;
    bool truncated = false;
    size_t max_frames = opt.limits.max_wait_keys + 5;  // routing id + the longest wait request
    for (int i = 0; i < kDrainPerWake && recv_frames(*router, frames, max_frames, &truncated); ++i) {
      if (frames.empty()) continue;
      std::string route = frames.front().to_string();
      frames.erase(frames.begin());
      handle(route, frames, truncated);
    }
    fail_erased();
    expire_waiters();
  }
  fail_all(StoreCode::stopping, "store server is stopping");
  router.reset();
  ctl_recv.reset();
}

void StoreServer::Impl::handle(const std::string& route, const Frames& frames, bool truncated) {
  uint64_t id = 0;
  if (truncated) {  // our client never sends this; a hostile one gets no id back
    log_bad("too many frames", "too many frames");
    reply(route, error_reply(0, StoreCode::too_large,
                             fail("request has more than ", opt.limits.max_wait_keys + 4, " frames").message()));
    return;
  }
  auto req = decode_request(frames, opt.limits, &id);
  if (!req) {
    log_bad(store_code_name(StoreCode(req.error().code())), req.error().message());
    reply(route, error_reply(id, StoreCode(req.error().code()), req.error().message()));
    return;
  }
  if (auto prefix = closed_prefix(req->keys); !prefix.empty()) {
    reply(route, error_reply(req->id, StoreCode::erased,
                             "key '" + req->keys[0] + "': its prefix '" + prefix + "' is closed (its plan was abandoned)"));
    return;
  }
  if (req->verb == Verb::set) {
    handle_set(route, *req);
  } else {
    handle_get_or_wait(route, *req);
  }
}

std::string StoreServer::Impl::closed_prefix(const std::vector<std::string>& keys) const {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& p : closed)
    for (const auto& k : keys)
      if (has_prefix(k, p)) return p;
  return "";
}

void StoreServer::Impl::handle_set(const std::string& route, StoreRequest& r) {
  const std::string& key = r.keys[0];
  std::string refused;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = data.find(key);
    size_t old = it == data.end() ? 0 : key.size() + it->second.size();
    size_t now = key.size() + r.value.size();
    if (it == data.end() && data.size() >= opt.limits.max_keys) {
      refused = fail("store full: ", data.size(), " keys (limit ", opt.limits.max_keys,
                     "); erase old epochs' prefixes").message();
    } else if (total - old + now > opt.limits.max_total_bytes) {
      refused = fail("store full: ", total, " bytes held, limit ", opt.limits.max_total_bytes).message();
    } else {
      total = total - old + now;
      data[key] = std::move(r.value);
    }
  }
  if (!refused.empty()) {
    reply(route, error_reply(r.id, StoreCode::full, refused));
    return;
  }
  StoreReply ok;
  ok.id = r.id;
  reply(route, ok);
  wake_waiters(key);
}

bool StoreServer::Impl::all_present(const std::vector<std::string>& keys, std::vector<char>* first_value) const {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& k : keys) {
    if (data.find(k) == data.end()) return false;
  }
  if (first_value) *first_value = data.find(keys[0])->second;
  return true;
}

// Replies to a request whose keys are all present (value for get, ok for wait).
void StoreServer::Impl::answer(const Waiter& w) {
  StoreReply r;
  r.id = w.id;
  if (w.verb == Verb::get) {
    r.verb = Verb::value;
    if (!all_present(w.keys, &r.value)) return;  // erased in between: the erase path answers it
  }
  reply(w.route, r);
}

void StoreServer::Impl::handle_get_or_wait(const std::string& route, StoreRequest& r) {
  Waiter w{route, r.id, r.verb, std::move(r.keys), 0};
  if (all_present(w.keys, nullptr)) {
    answer(w);
    return;
  }
  uint32_t t = std::min(r.timeout_ms, opt.limits.max_timeout_ms);
  if (t == 0) {
    reply(route, error_reply(r.id, StoreCode::timeout, "key '" + w.keys[0] + "' not set"));
    return;
  }
  if (waiters.size() >= opt.limits.max_waiters) {
    reply(route, error_reply(r.id, StoreCode::busy,
                             fail("store busy: ", waiters.size(), " requests already waiting").message()));
    return;
  }
  w.deadline_ms = mono_ms() + t;
  waiters.push_back(std::move(w));
}

void StoreServer::Impl::wake_waiters(const std::string& key) {
  for (size_t i = 0; i < waiters.size();) {
    const auto& w = waiters[i];
    bool mentions = std::find(w.keys.begin(), w.keys.end(), key) != w.keys.end();
    if (mentions && all_present(w.keys, nullptr)) {
      answer(w);
      waiters.erase(waiters.begin() + long(i));
    } else {
      ++i;
    }
  }
}

void StoreServer::Impl::expire_waiters() {
  int64_t now = mono_ms();
  for (size_t i = 0; i < waiters.size();) {
    const auto& w = waiters[i];
    if (w.deadline_ms > now) {
      ++i;
      continue;
    }
    std::string missing;
    for (const auto& k : w.keys) {
      if (!all_present({k}, nullptr)) missing += (missing.empty() ? "'" : ", '") + k + "'";
    }
    reply(w.route, error_reply(w.id, StoreCode::timeout, "timed out waiting for " + missing));
    waiters.erase(waiters.begin() + long(i));
  }
}

void StoreServer::Impl::fail_erased() {
  std::vector<std::string> prefixes;
  {
    std::lock_guard<std::mutex> lock(mu);
    prefixes.swap(erased);
  }
  if (prefixes.empty()) return;
  for (size_t i = 0; i < waiters.size();) {
    const auto& w = waiters[i];
    const std::string* hit = nullptr;
    for (const auto& k : w.keys) {
      for (const auto& p : prefixes) {
        if (has_prefix(k, p)) hit = &k;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    reply(w.route, error_reply(w.id, StoreCode::erased, "key '" + *hit + "' was erased (its epoch is over)"));
    waiters.erase(waiters.begin() + long(i));
  }
}

void StoreServer::Impl::fail_all(StoreCode code, const std::string& why) {
  for (const auto& w : waiters) reply(w.route, error_reply(w.id, code, why));
  waiters.clear();
}

StoreServer::StoreServer(zmq::context_t& ctx, std::string bind_endpoint, StoreServerOptions options)
    : impl_(std::make_unique<Impl>(ctx, std::move(bind_endpoint), std::move(options))) {}

StoreServer::~StoreServer() { stop(); }

Result<std::string> StoreServer::start() {
  if (impl_->thread.joinable()) return fail("store server already started on ", impl_->endpoint);
  SAL_TRY(impl_->open_sockets());
  impl_->thread = std::thread([impl = impl_.get()] {
    block_signals_in_this_thread();
    impl->run();
  });
  return impl_->endpoint;
}

void StoreServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->wake("stop");
  impl_->thread.join();
  std::lock_guard<std::mutex> lock(impl_->ctl_mu);
  impl_->ctl_send.reset();
}

void StoreServer::close_prefix(const std::string& prefix) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->closed.push_back(prefix);
    if (impl_->closed.size() > kClosedPrefixes) impl_->closed.pop_front();
  }
  erase_prefix(prefix);
}

void StoreServer::erase_prefix(const std::string& prefix) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto& d = impl_->data;
    auto it = d.lower_bound(prefix);
    while (it != d.end() && has_prefix(it->first, prefix)) {
      impl_->total -= it->first.size() + it->second.size();
      it = d.erase(it);
    }
    impl_->erased.push_back(prefix);
  }
  impl_->wake("wake");
}

size_t StoreServer::key_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->data.size();
}

size_t StoreServer::total_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->total;
}

const std::string& StoreServer::endpoint() const { return impl_->endpoint; }

}  // namespace sal::comm

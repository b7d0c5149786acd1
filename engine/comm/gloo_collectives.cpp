// gloo_collectives.cpp — see gloo_collectives.h. Each operation validates its arguments, builds
// Gloo options with this object's tag sequence and op timeout, registers the buffers it hands to
// Gloo (Tracker) and runs under guarded(), the one place where Gloo's exceptions become Errors.
#include "comm/gloo_collectives.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/transport/tcp/device.h>

#include <csignal>
#include <cstring>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

#include "comm/loop_ticker.h"
#include "comm/shm_plane.h"
#include "comm/store_client.h"
#include "core/clock.h"

namespace sal::comm {

namespace {

using ms = std::chrono::milliseconds;

// Point-to-point slots: prefix byte 0x5A (Gloo's collectives use 0x01..0x08), bit 40 tells the
// header from the payload, the user's tag in the low 32 bits.
constexpr uint64_t kP2PSlotBase = uint64_t(0x5A) << 56;
constexpr uint64_t kHeaderBit = uint64_t(1) << 40;
constexpr int kPumpEveryMs = 1;

uint64_t payload_slot(uint32_t tag) { return kP2PSlotBase | tag; }
uint64_t header_slot(uint32_t tag) { return kP2PSlotBase | kHeaderBit | tag; }

template <class T>
void sum_into(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<T*>(c);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

std::string counts_text(size_t n, const char* unit) { return std::to_string(n) + " " + unit; }

Status validate_options(const GlooOptions& o) {
  if (o.size < 1) return fail("size must be >= 1, got ", o.size);
  if (o.rank < 0 || o.rank >= o.size) return fail("rank ", o.rank, " out of range for size ", o.size);
  if (o.prefix.empty()) return fail("an epoch prefix is required (e.g. \"epoch-7\")");
  if (o.connect_timeout_ms <= 0 || o.op_timeout_ms <= 0) return fail("timeouts must be > 0");
  return ok_status();
}

// The store as one epoch's context sees it: every key under "<prefix>/" (the same joining as
// gloo's PrefixStore, so StoreServer::erase_prefix("<prefix>/") drops the epoch), and every
// blocking get bounded by the rendezvous timeout — Gloo's get() has no timeout of its own. Gloo's
// own waits pass the context's (pair connect) timeout; they get the longer rendezvous timeout too,
// as the waits are interruptible and a peer may still be leaving an abandoned epoch.
//
// Gloo's full mesh asks, for each peer, wait({its key}) and then get(its key): with the
// controller's store (a StoreClient) that wait fetches the value — the server answers a get as soon
// as the key exists — and the get that follows takes it from here, one round trip a peer instead of
// three (the connect of every plan switch makes size - 1 of them on every worker); a get alone (the
// shared-memory plane's, after its wait for every key) is one round trip, not two.
class EpochStore final : public gloo::rendezvous::Store {
 public:
  EpochStore(const std::string& prefix, gloo::rendezvous::Store& inner, ms timeout)
      : prefix_(prefix + "/"), inner_(inner), client_(dynamic_cast<StoreClient*>(&inner)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { inner_.set(prefix_ + key, data); }
  std::vector<char> get(const std::string& key) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = fetched_.find(key); it != fetched_.end()) {
        auto value = std::move(it->second);
        fetched_.erase(it);
        return value;
      }
    }
    return fetch(key, timeout_);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const ms& timeout) override {
    if (client_ && keys.size() == 1) {
      auto value = fetch(keys[0], std::max(timeout, timeout_));
      std::lock_guard<std::mutex> lock(mu_);
      fetched_[keys[0]] = std::move(value);
      return;
    }
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    inner_.wait(full, std::max(timeout, timeout_));
  }

 private:
  // The key's value once it exists (within `timeout`); throws as Gloo's stores do.
  std::vector<char> fetch(const std::string& key, ms timeout) {
    if (!client_) {
      inner_.wait({prefix_ + key}, timeout);
      return inner_.get(prefix_ + key);
    }
    auto value = client_->fetch(prefix_ + key, timeout);
    if (!value) throw StoreError(value.error().message(), StoreCode(value.error().code()));
    return std::move(*value);
  }

  std::string prefix_;
  gloo::rendezvous::Store& inner_;
  StoreClient* client_;  // the controller's store: a get that waits (null: another store)
  ms timeout_;
  std::mutex mu_;
  std::map<std::string, std::vector<char>> fetched_;  // values a wait fetched, for the get after it
};

// One device per data-plane address, shared by every epoch in this process, with the ticker that
// hurries its loop through connects and teardowns (declared after the device: destroyed first).
struct DeviceEntry {
  std::shared_ptr<gloo::transport::Device> device;
  std::unique_ptr<LoopTicker> ticker;  // null if it could not attach (then connects just take longer)
};
std::mutex g_devices_mu;
std::map<std::string, DeviceEntry> g_devices;

// The ticker of a device made by gloo_device(); null for any other device.
LoopTicker* ticker_of(const gloo::transport::Device* device) {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  for (auto& [host, entry] : g_devices)
    if (entry.device.get() == device) return entry.ticker.get();
  return nullptr;
}

}  // namespace

Result<std::shared_ptr<gloo::transport::Device>> gloo_device(const std::string& hostname) {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  auto it = g_devices.find(hostname);
  if (it != g_devices.end()) return it->second.device;
  try {
    gloo::transport::tcp::attr a;
    a.hostname = hostname;
    DeviceEntry entry{gloo::transport::tcp::CreateDevice(a), nullptr};
    if (auto t = LoopTicker::attach(entry.device)) entry.ticker = std::move(*t);
    auto dev = entry.device;
    g_devices[hostname] = std::move(entry);
    return dev;
  } catch (const std::exception& e) {
    return fail("creating a Gloo TCP device on '", hostname, "': ", e.what());
  }
}

Result<std::unique_ptr<Collectives>> connect_gloo(const GlooOptions& opts, gloo::rendezvous::Store& store) {
  auto dev = gloo_device(opts.hostname);
  if (!dev) return dev.error();
  return connect_gloo(opts, store, *dev);
}

Result<std::unique_ptr<Collectives>> connect_gloo(const GlooOptions& opts, gloo::rendezvous::Store& store,
                                                  std::shared_ptr<gloo::transport::Device> device) {
  auto c = GlooCollectives::connect(opts, store, std::move(device));
  if (!c) return c.error();
  return std::unique_ptr<Collectives>(std::move(*c));
}

// ---------- connect ----------

namespace {

// How many times the ranks connect the mesh together before giving up: a stray connection into a
// pair's listening port is rare, two in a row rarer still.
constexpr int kMeshAttempts = 3;

// One try at the full mesh: Gloo's pair connects under `store`, then the store round in which every
// rank judges every pair (socket_watch.h). An error when the ranks cannot try again together (a
// rank's report never came); `problem` when they can (the verdict is the same on every rank).
struct MeshTry {
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  PeerSockets sockets;
  std::string problem;

  static Result<MeshTry> run(const GlooOptions& opts, gloo::rendezvous::Store& store,
                             std::shared_ptr<gloo::transport::Device>& device, LoopTicker* ticker, int64_t rendezvous_ms) {
    MeshTry t;
    auto before = socket_inodes();
    t.ctx = std::make_shared<gloo::rendezvous::Context>(opts.rank, opts.size);
    t.ctx->setTimeout(ms(opts.connect_timeout_ms));  // before connectFullMesh: it bounds the pair connects
    MeshReport mine;
    try {
      LoopTicker::Ticking hurry(ticker);  // each pair's connect waits for a loop tick (loop_ticker.h)
      t.ctx->connectFullMesh(store, device);
    } catch (const std::exception& e) {
      mine.error = *e.what() ? e.what() : "connectFullMesh failed";
    }
    if (opts.size == 1) {
      if (!mine.error.empty()) return fail(mine.error);
      return t;
    }
    std::vector<PeerSocket> candidates;
    if (mine.error.empty()) candidates = new_tcp_sockets(before, resolve_host(opts.hostname));
    for (const auto& c : candidates) mine.sockets.emplace_back(c.local, c.peer);
    auto verdict = exchange_mesh_reports(mine, store, opts.rank, opts.size, rendezvous_ms);
    if (!verdict) {
      PeerSockets drop(std::move(candidates));
      if (!mine.error.empty()) return fail(mine.error);  // the first thing that went wrong
      return verdict.error();
    }
    t.problem = verdict->problem;
    t.sockets = keep_peer_sockets(std::move(candidates), verdict->peer_rank[size_t(opts.rank)]);
    return t;
  }
};

}  // namespace

Result<std::unique_ptr<GlooCollectives>> GlooCollectives::connect(const GlooOptions& opts,
                                                                  gloo::rendezvous::Store& store,
                                                                  std::shared_ptr<gloo::transport::Device> device) {
  const std::string what = "connecting rank " + std::to_string(opts.rank) + " of " + std::to_string(opts.size) +
                           " under '" + opts.prefix + "'";
  if (auto st = validate_options(opts); !st) return st.error().with_context(what);
  if (!device) return fail(what, ": no device");
  ignore_sigpipe();
  int64_t t0 = mono_ns();
  int64_t rendezvous_ms = opts.rendezvous_timeout_ms > 0 ? opts.rendezvous_timeout_ms : opts.connect_timeout_ms;
  EpochStore scoped(opts.prefix, store, ms(rendezvous_ms));
  LoopTicker* ticker = ticker_of(device.get());
  if (opts.shared_memory && opts.size > 1) {  // every rank on this host: shared memory, no Gloo context
    auto plane = ShmPlane::connect(opts.rank, opts.size, scoped, rendezvous_ms);
    if (!plane) return plane.error().with_context(what);
    if (*plane)
      return std::unique_ptr<GlooCollectives>(new GlooCollectives(opts, nullptr, PeerSockets{},
                                                                  double(mono_ns() - t0) / 1e6, ticker, std::move(*plane), 1));
  }
  for (int attempt = 1;; ++attempt) {
    // a retry's keys under the epoch's prefix, so erasing the epoch erases them too
    EpochStore scoped_try(opts.prefix + (attempt == 1 ? "" : "/again-" + std::to_string(attempt)), store, ms(rendezvous_ms));
    auto mesh = MeshTry::run(opts, scoped_try, device, ticker, rendezvous_ms);
    if (!mesh) return mesh.error().with_context(what);
    if (mesh->problem.empty()) {
      mesh->ctx->setTimeout(ms(opts.op_timeout_ms));
      double connect_ms = double(mono_ns() - t0) / 1e6;
      return std::unique_ptr<GlooCollectives>(new GlooCollectives(opts, std::move(mesh->ctx), std::move(mesh->sockets),
                                                                  connect_ms, ticker, nullptr, attempt));
    }
    {
      LoopTicker::Ticking hurry(ticker);  // each open pair's close waits for a loop tick
      mesh->sockets = PeerSockets{};
      mesh->ctx.reset();
    }
    if (attempt == kMeshAttempts) return fail(what, ": ", mesh->problem, " (", attempt, " tries)");
    spdlog::warn("{}: {}; every rank connects again (try {} of {})", what, mesh->problem, attempt + 1, kMeshAttempts);
  }
}

GlooCollectives::GlooCollectives(const GlooOptions& opts, std::shared_ptr<gloo::rendezvous::Context> ctx,
                                 PeerSockets sockets, double connect_ms, LoopTicker* ticker,
                                 std::unique_ptr<ShmPlane> shm, int connect_attempts)
    : rank_(opts.rank),
      size_(opts.size),
      prefix_(opts.prefix),
      verify_counts_(opts.verify_counts),
      connect_ms_(connect_ms),
      connect_attempts_(connect_attempts),
      ctx_(std::move(ctx)),
      sockets_(std::move(sockets)),
      ticker_(ticker),
      shm_(std::move(shm)),
      op_timeout_ms_(opts.op_timeout_ms) {}

GlooCollectives::~GlooCollectives() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pump_stop_ = true;
  }
  if (pump_.joinable()) pump_.join();
  shm_.reset();  // its endpoints first: nothing of it may outlive the epoch
  {
    LoopTicker::Ticking hurry(ticker_);  // each open pair's close waits for a loop tick
    ctx_.reset();  // Gloo closes its fds
  }
  // sockets_ closes our duplicates last, which releases the sockets themselves.
}

Result<std::unique_ptr<Collectives>> GlooCollectives::narrow(std::vector<int> members, std::string prefix) {
  const std::string what = "narrowing epoch '" + prefix_ + "' to " + std::to_string(members.size()) + " of its " +
                           std::to_string(size_) + " ranks as '" + prefix + "'";
  if (!shm_) return Collectives::narrow(std::move(members), std::move(prefix)).error().with_context(what);
  if (spent_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    return fail(what, ": the epoch is over (", reason_, ")");
  }
  auto rank = shm_->narrow(members);
  if (!rank) return rank.error().with_context(what);
  GlooOptions o;
  o.rank = *rank;
  o.size = int(members.size());
  o.prefix = std::move(prefix);
  o.verify_counts = verify_counts_;
  o.op_timeout_ms = op_timeout_ms_.load();
  std::unique_ptr<GlooCollectives> out(new GlooCollectives(o, nullptr, PeerSockets{}, 0.0, ticker_, std::move(shm_), 1));
  out->tag_ = tag_;  // a tag of this epoch's calls is never one of the new one's
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason_ = "epoch '" + prefix_ + "' narrowed to '" + out->prefix_ + "'";
  }
  spent_.store(true);
  return std::unique_ptr<Collectives>(std::move(out));
}

// ---------- abort ----------

void GlooCollectives::spend(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.empty()) reason_ = reason;
  }
  spent_.store(true);
  sockets_.shutdown_all();
  if (shm_) shm_->give_up();
}

void GlooCollectives::abort(const std::string& why) {
  bool start_pump = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.empty()) {
      reason_ = "epoch '" + prefix_ + "' aborted: " + why;
      aborted_by_call_ = true;
    }
    spent_.store(true);
    start_pump = in_call_ && !pump_.joinable() && !pump_stop_;
    if (start_pump) pump_ = std::thread([this] { pump(); });
  }
  sockets_.shutdown_all();  // Gloo's I/O thread sees EOF on every pair; the peers see FIN
  if (shm_) shm_->give_up();  // the peers get this rank's notice (a wait in flight wakes and fails)
}

// Wakes the waits of the call in flight until it returns (Gloo misses buffers mid-transfer).
void GlooCollectives::pump() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pump_stop_ || !in_call_) return;
      for (auto* b : inflight_) {
        b->abortWaitRecv();
        b->abortWaitSend();
      }
    }
    std::this_thread::sleep_for(ms(kPumpEveryMs));
  }
}

GlooCollectives::Tracker::Tracker(GlooCollectives* c, std::vector<gloo::transport::UnboundBuffer*> bufs) : c_(c) {
  std::lock_guard<std::mutex> lock(c_->mu_);
  c_->inflight_ = std::move(bufs);
}

GlooCollectives::Tracker::~Tracker() {
  std::lock_guard<std::mutex> lock(c_->mu_);
  c_->inflight_.clear();
}

void GlooCollectives::set_op_timeout(std::chrono::milliseconds t) {
  op_timeout_ms_.store(t.count() > 0 ? t.count() : 1);
}

// ---------- the guard ----------

Status GlooCollectives::guarded(const std::string& what, const std::function<void()>& body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (spent_.load()) return fail(what, ": ", reason_.empty() ? "epoch is over" : reason_);
    in_call_ = true;
  }
  std::string error;
  try {
    body();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  std::string reason;
  bool by_abort = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_call_ = false;
    reason = reason_;
    by_abort = aborted_by_call_;
  }
  if (by_abort) {
    // Aborted while running: whatever Gloo said (or did not say), the result is not to be used.
    return fail(what, ": ", reason, error.empty() ? "" : " (gloo: " + error + ")");
  }
  if (error.empty()) return ok_status();
  spend("failed earlier: " + what + ": " + error);
  return fail(what, ": ", error);
}

std::unique_ptr<gloo::transport::UnboundBuffer> GlooCollectives::buffer(const void* p, size_t bytes) {
  static float dummy = 0;  // Gloo wants a pointer even for an empty buffer
  void* ptr = p ? const_cast<void*>(p) : &dummy;
  return ctx_->createUnboundBuffer(ptr, bytes);
}

// ---------- collectives ----------

template <class T>
Status GlooCollectives::allreduce_impl(T* data, size_t n, const char* type) {
  const std::string what = "allreduce of " + counts_text(n, type);
  if (n > 0 && !data) return guarded(what, [] { throw std::invalid_argument("null data"); });
  if (n == 0 || size_ == 1) return guarded(what, [] {});
  if (shm_ || size_ <= kDirectMaxRanks) return guarded(what, [&] { direct_allreduce(data, n); });
  return guarded(what, [&] {
    gloo::AllreduceOptions o(ctx_);
    auto out = buffer(data, n * sizeof(T));
    auto* raw = out.get();
    o.setOutput<T>(std::move(out));
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setReduceFunction(&sum_into<T>);
    o.setTag(next_tag());
    o.setTimeout(op_timeout());
    Tracker t(this, {raw});
    gloo::allreduce(o);
  });
}

Status GlooCollectives::allreduce_sum(float* data, size_t n) { return allreduce_impl(data, n, "floats"); }
Status GlooCollectives::allreduce_sum(double* data, size_t n) { return allreduce_impl(data, n, "doubles"); }

Status GlooCollectives::allgather(const void* in, size_t bytes, void* out) {
  const std::string what = "allgather of " + counts_text(bytes, "bytes") + " per rank";
  if (bytes > 0 && (!in || !out)) return guarded(what, [] { throw std::invalid_argument("null buffer"); });
  if (bytes == 0) return guarded(what, [] {});
  if (size_ == 1) return guarded(what, [&] { std::memmove(out, in, bytes); });
  if (shm_ || size_ <= kDirectMaxRanks) return guarded(what, [&] { direct_allgather(in, bytes, out); });
  return guarded(what, [&] {
    gloo::AllgatherOptions o(ctx_);
    auto ib = buffer(in, bytes);
    auto ob = buffer(out, bytes * size_t(size_));
    std::vector<gloo::transport::UnboundBuffer*> raw = {ib.get(), ob.get()};
    o.setInput<char>(std::move(ib));
    o.setOutput<char>(std::move(ob));
    o.setTag(next_tag());
    o.setTimeout(op_timeout());
    Tracker t(this, raw);
    gloo::allgather(o);
  });
}

// Every rank's send and receive counts, gathered; every rank checks the whole matrix, so all of
// them reach the same verdict.
Status GlooCollectives::check_counts(const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts) {
  const size_t n = size_t(size_);
  std::vector<int64_t> mine(send_counts);
  mine.insert(mine.end(), recv_counts.begin(), recv_counts.end());
  std::vector<int64_t> all(2 * n * n);
  SAL_TRY(allgather(mine.data(), mine.size() * sizeof(int64_t), all.data()));
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) {
      int64_t sent = all[s * 2 * n + d];
      int64_t expected = all[d * 2 * n + n + s];
      if (sent != expected) {
        return fail("rank ", s, " sends ", sent, " floats to rank ", d, ", which expects ", expected);
      }
    }
  }
  return ok_status();
}

Status GlooCollectives::alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                                  const std::vector<int64_t>& recv_counts) {
  int64_t total_send = 0;
  int64_t total_recv = 0;
  bool bad = send_counts.size() != size_t(size_) || recv_counts.size() != size_t(size_);
  for (size_t i = 0; !bad && i < size_t(size_); ++i) {
    bad = send_counts[i] < 0 || recv_counts[i] < 0;
    total_send += send_counts[i];
    total_recv += recv_counts[i];
  }
  const std::string what = "alltoallv sending " + std::to_string(total_send) + " and receiving " +
                           std::to_string(total_recv) + " floats";
  if (bad) {
    return guarded(what, [] { throw std::invalid_argument("counts must be size() non-negative numbers each"); });
  }
  if ((total_send > 0 && !send) || (total_recv > 0 && !recv)) {
    return guarded(what, [] { throw std::invalid_argument("null buffer"); });
  }
  if (verify_counts_ && size_ > 1) {
    if (auto st = check_counts(send_counts, recv_counts); !st) {
      auto err = st.error().with_context(what);
      spend("failed earlier: " + err.message());
      return err;
    }
  }
  if (size_ == 1) {
    return guarded(what, [&] {
      if (send_counts[0] != recv_counts[0]) throw std::invalid_argument("send and receive counts differ");
      std::memmove(recv, send, size_t(total_send) * sizeof(float));
    });
  }
  if (shm_ || size_ <= kDirectMaxRanks)
    return guarded(what, [&] { direct_alltoallv(send, send_counts, recv, recv_counts); });
  return guarded(what, [&] {
    gloo::AlltoallvOptions o(ctx_);
    auto ib = buffer(send, size_t(total_send) * sizeof(float));
    auto ob = buffer(recv, size_t(total_recv) * sizeof(float));
    std::vector<gloo::transport::UnboundBuffer*> raw = {ib.get(), ob.get()};
    o.setInput<float>(std::move(ib), send_counts);
    o.setOutput<float>(std::move(ob), recv_counts);
    o.setTag(next_tag());
    o.setTimeout(op_timeout());
    Tracker t(this, raw);
    gloo::alltoallv(o);
  });
}

Status GlooCollectives::barrier() {
  if (size_ == 1) return guarded("barrier", [] {});
  if (shm_) {
    return guarded("barrier", [&] {
      char mine = 0;
      std::vector<char> all(static_cast<size_t>(size_));
      direct_allgather(&mine, 1, all.data());
    });
  }
  return guarded("barrier", [&] {
    gloo::BarrierOptions o(ctx_);
    o.setTag(next_tag());
    o.setTimeout(op_timeout());
    gloo::barrier(o);
  });
}

// ---------- point to point ----------

Status GlooCollectives::send(int peer, const void* data, size_t bytes, uint32_t tag) {
  return exchange({SendSpec{peer, data, bytes, tag}}, {});
}

Status GlooCollectives::recv(int peer, void* data, size_t bytes, uint32_t tag) {
  return exchange({}, {RecvSpec{peer, data, bytes, tag}});
}

// Posts every header and payload send and every header receive; checks each received header
// against what the caller expects; posts the payload receives; waits for everything.
void GlooCollectives::exchange_body(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) {
  const ms timeout = op_timeout();
  std::vector<ExchangeHeader> out_headers(sends.size());
  std::vector<ExchangeHeader> in_headers(recvs.size());
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;  // declared before the Tracker
  std::vector<gloo::transport::UnboundBuffer*> raw;
  auto make = [&](const void* p, size_t n) {
    bufs.push_back(buffer(p, n));
    raw.push_back(bufs.back().get());
    return bufs.back().get();
  };
  std::vector<gloo::transport::UnboundBuffer*> in_h, out_h, out_p, in_p;
  for (size_t i = 0; i < recvs.size(); ++i) in_h.push_back(make(&in_headers[i], sizeof(ExchangeHeader)));
  for (size_t i = 0; i < sends.size(); ++i) {
    out_headers[i].tag = sends[i].tag;
    out_headers[i].bytes = sends[i].bytes;
    out_h.push_back(make(&out_headers[i], sizeof(ExchangeHeader)));
    out_p.push_back(sends[i].bytes > 0 ? make(sends[i].data, sends[i].bytes) : nullptr);
  }
  for (size_t i = 0; i < recvs.size(); ++i) in_p.push_back(recvs[i].bytes > 0 ? make(recvs[i].data, recvs[i].bytes) : nullptr);
  Tracker t(this, raw);

  for (size_t i = 0; i < recvs.size(); ++i) in_h[i]->recv(recvs[i].peer, header_slot(recvs[i].tag));
  for (size_t i = 0; i < sends.size(); ++i) {
    out_h[i]->send(sends[i].peer, header_slot(sends[i].tag));
    if (out_p[i]) out_p[i]->send(sends[i].peer, payload_slot(sends[i].tag));
  }
  auto must = [](bool completed, const char* what) {
    if (!completed) throw std::runtime_error(std::string(what) + " was interrupted");
  };
  for (size_t i = 0; i < recvs.size(); ++i) {
    must(in_h[i]->waitRecv(timeout), "header receive");
    const auto& h = in_headers[i];
    if (h.magic != ExchangeHeader::kMagic || h.tag != recvs[i].tag || h.bytes != recvs[i].bytes) {
      throw std::runtime_error("rank " + std::to_string(recvs[i].peer) + " sent " + std::to_string(h.bytes) +
                               " bytes with tag " + std::to_string(h.tag) + ", expected " +
                               std::to_string(recvs[i].bytes) + " bytes with tag " + std::to_string(recvs[i].tag));
    }
    if (in_p[i]) in_p[i]->recv(recvs[i].peer, payload_slot(recvs[i].tag));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    must(out_h[i]->waitSend(timeout), "header send");
    if (out_p[i]) must(out_p[i]->waitSend(timeout), "send");
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (in_p[i]) must(in_p[i]->waitRecv(timeout), "receive");
  }
}

Status GlooCollectives::exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) {
  const ExchangeCheck check = check_exchange(rank_, size_, sends, recvs);
  if (!check.problem.empty()) return guarded(check.what, [&] { throw std::invalid_argument(check.problem); });
  if (shm_)  // the same protocol (a header ahead of each payload) over shared memory
    return guarded(check.what, [&] { shm_->exchange(sends, recvs, op_timeout()); });
  return guarded(check.what, [&] { exchange_body(sends, recvs); });
}

}  // namespace sal::comm

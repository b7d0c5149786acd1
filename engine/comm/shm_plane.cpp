// shm_plane.cpp — see shm_plane.h.
#include "comm/shm_plane.h"

#include <gloo/rendezvous/store.h>
#include <poll.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>

namespace sal::comm {

namespace {

using ms = std::chrono::milliseconds;

// UCX settings, each unless its UCX_ environment variable says otherwise:
// - TLS: posix shared memory, and `self` for a rank's message to itself. Not cross-memory attach
//   (cma): UCX 1.13 offers no peer-failure handling on its shared-memory transports, and a cma
//   transfer from a peer that died ends the survivor's process (ucs_fatal on process_vm_readv's
//   ESRCH, seen in the SIGKILL drill of tests/comm). Not sysv segments (small system limits).
// - RNDV_THRESH: every message eager, in fragments through the receiver's shared queue (the
//   rendezvous protocol over posix alone measured 11 ms for a 1 MB round trip, against 0.8 ms).
// - MM_FIFO_SIZE: a queue of 256 elements (64 by default), so a large message does not stall on
//   the receiver's wake-ups between fragments.
constexpr std::pair<const char*, const char*> kSettings[] = {
    {"TLS", "posix,self"}, {"RNDV_THRESH", "inf"}, {"MM_FIFO_SIZE", "256"}};
// After an error, how long cancelled receives get to complete before they are abandoned.
constexpr auto kCancelGrace = ms(50);
constexpr const char* kRecordMagic = "SALSHM1";

// Tag: kind (8 bits) | sender rank (16 bits) | unused (8 bits) | the caller's tag (32 bits).
uint64_t make_tag(ShmPlane::Kind kind, int sender, uint32_t tag) {
  return (uint64_t(kind) << 56) | (uint64_t(uint16_t(sender)) << 40) | tag;
}

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

// poll() events that say a peer's socket was shut or closed.
constexpr short kClosed = POLLRDHUP | POLLHUP | POLLERR | POLLNVAL;

std::string closed_text(int peer) {
  return "connection closed by rank " + std::to_string(peer) + " (it died or gave up on the epoch)";
}

// The process's UCX context, created on first use; null (with the reason) where UCX cannot start.
struct Context {
  ucp_context_h ctx = nullptr;
  std::string error;
};

const Context& ucx() {
  static Context c = [] {
    Context out;
    ucp_config_t* config = nullptr;
    if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
      out.error = "ucp_config_read: " + status_text(s);
      return out;
    }
    for (auto [key, value] : kSettings)
      if (!std::getenv(("UCX_" + std::string(key)).c_str())) (void)ucp_config_modify(config, key, value);
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    ucs_status_t s = ucp_init(&p, config, &out.ctx);
    ucp_config_release(config);
    if (s != UCS_OK) {
      out.ctx = nullptr;
      out.error = "ucp_init: " + status_text(s);
    }
    return out;
  }();
  return c;
}

std::string read_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_of(const char* path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// What two processes must share to reach each other's memory: the same boot of the same machine,
// and the same mount, IPC and PID namespaces (shared segments, cross-memory attach).
std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + read_line("/proc/sys/kernel/random/boot_id") + "/" + link_of("/proc/self/ns/mnt") +
         "/" + link_of("/proc/self/ns/ipc") + "/" + link_of("/proc/self/ns/pid");
}

}  // namespace

// One epoch's UCX worker, its address and its endpoints.
struct ShmPlane::Worker {
  ucp_worker_h worker = nullptr;
  int efd = -1;
  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  std::vector<ucp_ep_h> eps;  // per rank (null for this rank)

  ~Worker() {
    for (ucp_ep_h ep : eps) {
      if (!ep) continue;
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(ep, &p);
      if (r && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
    }
    if (address) ucp_worker_release_address(worker, address);
    if (worker) ucp_worker_destroy(worker);
  }

  static Result<std::unique_ptr<Worker>> create() {
    const Context& c = ucx();
    if (!c.ctx) return fail(c.error);
    auto w = std::make_unique<Worker>();
    ucp_worker_params_t p{};
    p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    p.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread uses it; interrupt() only signals, which any thread may
    if (ucs_status_t s = ucp_worker_create(c.ctx, &p, &w->worker); s != UCS_OK) {
      w->worker = nullptr;
      return fail("ucp_worker_create: ", status_text(s));
    }
    if (ucs_status_t s = ucp_worker_get_efd(w->worker, &w->efd); s != UCS_OK)
      return fail("ucp_worker_get_efd: ", status_text(s));
    if (ucs_status_t s = ucp_worker_get_address(w->worker, &w->address, &w->address_len); s != UCS_OK) {
      w->address = nullptr;
      return fail("ucp_worker_get_address: ", status_text(s));
    }
    return w;
  }
};

// Flushes every endpoint (until each has completed its wire-up with its peer), progressing the
// worker; false on an error or after `timeout`.
bool ShmPlane::flush_all(Worker& w, ms timeout) {
  std::vector<void*> pending;
  for (ucp_ep_h ep : w.eps) {
    if (!ep) continue;
    ucp_request_param_t p{};
    void* r = ucp_ep_flush_nbx(ep, &p);
    if (UCS_PTR_IS_ERR(r)) return false;
    if (r) pending.push_back(r);
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  bool ok = true;
  while (!pending.empty()) {
    if (std::chrono::steady_clock::now() > until) {
      ok = false;
      for (void* r : pending) ucp_request_cancel(w.worker, r);
    }
    (void)ucp_worker_progress(w.worker);
    for (size_t i = 0; i < pending.size();) {
      const ucs_status_t st = ucp_request_check_status(pending[i]);
      if (st == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      ok = ok && st == UCS_OK;
      ucp_request_free(pending[i]);
      pending.erase(pending.begin() + long(i));
    }
  }
  return ok;
}

Result<std::unique_ptr<ShmPlane>> ShmPlane::connect(int rank, int size, gloo::rendezvous::Store& store,
                                                    std::vector<int> peer_fds, int64_t timeout_ms) {
  auto worker = Worker::create();  // a failure here only means this rank offers no address
  const std::string me = host_identity();
  std::vector<char> record(kRecordMagic, kRecordMagic + std::strlen(kRecordMagic));
  record.push_back('\0');
  record.insert(record.end(), me.begin(), me.end());
  record.push_back('\0');
  if (worker) {
    const char* a = reinterpret_cast<const char*>((*worker)->address);
    record.insert(record.end(), a, a + (*worker)->address_len);
  }
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("sal-shm/" + std::to_string(r));
  std::vector<std::vector<char>> peers(static_cast<size_t>(size));
  try {
    store.set(keys[size_t(rank)], record);
    store.wait(keys, ms(timeout_ms));
    for (int r = 0; r < size; ++r) peers[size_t(r)] = r == rank ? record : store.get(keys[size_t(r)]);
  } catch (const std::exception& e) {
    return fail("shared-memory rendezvous: ", e.what());
  }
  // every rank decides alike: the plane only if every record names this host and has an address
  bool usable = worker.ok();
  std::vector<std::vector<char>> addresses(static_cast<size_t>(size));
  for (int r = 0; r < size && usable; ++r) {
    const auto& rec = peers[size_t(r)];
    const size_t magic = std::strlen(kRecordMagic) + 1;
    const auto sep = std::find(rec.begin() + long(std::min(magic, rec.size())), rec.end(), '\0');
    usable = rec.size() > magic && std::string(rec.begin(), rec.begin() + long(magic - 1)) == kRecordMagic &&
             sep != rec.end() && std::string(rec.begin() + long(magic), sep) == me && sep + 1 != rec.end();
    if (usable) addresses[size_t(r)].assign(sep + 1, rec.end());
  }
  if (!usable) return std::unique_ptr<ShmPlane>();
  auto& w = **worker;
  w.eps.assign(size_t(size), nullptr);
  bool connected = true;
  for (int r = 0; r < size && connected; ++r) {
    if (r == rank) continue;
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address = reinterpret_cast<const ucp_address_t*>(addresses[size_t(r)].data());
    connected = ucp_ep_create(w.worker, &p, &w.eps[size_t(r)]) == UCS_OK;
    if (!connected) w.eps[size_t(r)] = nullptr;
  }
  // complete every endpoint's wire-up now (each rank progresses its worker while it flushes, so the
  // peers' handshakes are answered): a message sent on an endpoint still wiring up waits in the
  // sender's queue for its progress, and a rank that gives up on the epoch progresses no more
  if (connected) connected = flush_all(w, ms(timeout_ms));
  // every rank says whether it has its endpoints; all use the plane, or none (then Gloo)
  std::vector<std::string> ready;
  for (int r = 0; r < size; ++r) ready.push_back("sal-shm-ready/" + std::to_string(r));
  bool all = connected;
  try {
    store.set(ready[size_t(rank)], std::vector<char>{connected ? '1' : '0'});
    store.wait(ready, ms(timeout_ms));
    for (int r = 0; r < size && all; ++r) all = r == rank || store.get(ready[size_t(r)]) == std::vector<char>{'1'};
  } catch (const std::exception& e) {
    return fail("shared-memory rendezvous: ", e.what());
  }
  if (!all) return std::unique_ptr<ShmPlane>();
  return std::unique_ptr<ShmPlane>(new ShmPlane(rank, std::move(*worker), std::move(peer_fds)));
}

ShmPlane::ShmPlane(int rank, std::unique_ptr<Worker> w, std::vector<int> peer_fds)
    : rank_(rank), w_(std::move(w)), peer_fds_(std::move(peer_fds)) {}

ShmPlane::~ShmPlane() = default;

void ShmPlane::interrupt() {
  interrupted_ = true;
  (void)ucp_worker_signal(w_->worker);
}

namespace {

// The length a receive got, filled by its completion callback.
void on_received(void*, ucs_status_t, const ucp_tag_recv_info_t* info, void* user_data) {
  *static_cast<size_t*>(user_data) = info->length;
}

// A point-to-point message's header, sent ahead of its payload.
struct P2PHeader {
  uint32_t magic = 0x53414C50;  // "SALP"
  uint32_t tag = 0;
  uint64_t bytes = 0;
};

}  // namespace

// Posts a receive (always completing through the callback: UCX 1.13 reports length 0 for one that
// completes at once). `length` must stay valid until it completes.
void ShmPlane::post_recv(Batch& b, Kind kind, const RecvSpec& r, size_t* length) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = on_received;
  p.user_data = length;
  void* req = ucp_tag_recv_nbx(w_->worker, r.data, r.bytes, make_tag(kind, r.peer, r.tag), ~uint64_t(0), &p);
  if (UCS_PTR_IS_ERR(req)) abandon(b, "receive from rank " + std::to_string(r.peer) + ": " + status_text(UCS_PTR_STATUS(req)));
  b.push_back({req, &r, length, r.peer});
}

// Posts a send; `sync` completes it only once the receiver has matched it (taken it into a
// receive it posted), not when the data has left.
void ShmPlane::post_send(Batch& b, Kind kind, const SendSpec& s, bool sync) {
  ucp_request_param_t p{};
  const uint64_t tag = make_tag(kind, rank_, s.tag);
  void* req = sync ? ucp_tag_send_sync_nbx(w_->eps[size_t(s.peer)], s.data, s.bytes, tag, &p)
                   : ucp_tag_send_nbx(w_->eps[size_t(s.peer)], s.data, s.bytes, tag, &p);
  if (UCS_PTR_IS_ERR(req)) abandon(b, "send to rank " + std::to_string(s.peer) + ": " + status_text(UCS_PTR_STATUS(req)));
  if (req) b.push_back({req, nullptr, nullptr, s.peer});
}

void ShmPlane::transfer(Kind kind, const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs,
                        ms timeout) {
  check_peers(sends, recvs);
  Batch b;
  std::vector<size_t> received(recvs.size(), 0);
  for (size_t i = 0; i < recvs.size(); ++i) post_recv(b, kind, recvs[i], &received[i]);
  for (const SendSpec& s : sends) post_send(b, kind, s, false);
  wait(b, timeout);
}

// Headers first: each receive's payload is posted only once its header agrees, and payloads are
// sent synchronously — so on a mismatch the receiver names it and never takes the payload, and the
// sender's send fails once the receiver has failed and closed its sockets (as on Gloo).
void ShmPlane::exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs, ms timeout) {
  check_peers(sends, recvs);
  std::vector<P2PHeader> in(recvs.size()), out(sends.size());
  std::vector<RecvSpec> in_specs;
  std::vector<SendSpec> out_specs;
  for (size_t i = 0; i < recvs.size(); ++i) in_specs.push_back({recvs[i].peer, &in[i], sizeof(P2PHeader), recvs[i].tag});
  for (size_t i = 0; i < sends.size(); ++i) {
    out[i].tag = sends[i].tag;
    out[i].bytes = sends[i].bytes;
    out_specs.push_back({sends[i].peer, &out[i], sizeof(P2PHeader), sends[i].tag});
  }
  Batch headers, rest;
  std::vector<size_t> header_len(recvs.size(), 0), received(recvs.size(), 0);
  for (size_t i = 0; i < recvs.size(); ++i) post_recv(headers, Kind::p2p_header, in_specs[i], &header_len[i]);
  for (size_t i = 0; i < sends.size(); ++i) {
    post_send(rest, Kind::p2p_header, out_specs[i], false);
    post_send(rest, Kind::p2p, sends[i], true);
  }
  try {
    wait(headers, timeout);
  } catch (...) {
    cancel(rest);
    throw;
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    const P2PHeader& h = in[i];
    if (h.magic != P2PHeader{}.magic || h.tag != recvs[i].tag || h.bytes != recvs[i].bytes)
      abandon(rest, "rank " + std::to_string(recvs[i].peer) + " sent " + std::to_string(h.bytes) + " bytes with tag " +
                     std::to_string(h.tag) + ", expected " + std::to_string(recvs[i].bytes) + " bytes with tag " +
                     std::to_string(recvs[i].tag));
    post_recv(rest, Kind::p2p, recvs[i], &received[i]);
  }
  wait(rest, timeout);
}

bool ShmPlane::closed(int peer) const {
  if (peer < 0 || size_t(peer) >= peer_fds_.size() || peer_fds_[size_t(peer)] < 0) return false;
  pollfd p{peer_fds_[size_t(peer)], POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & kClosed);
}

// A peer of this call whose socket is shut or closed died, failed or gave up: fail at once.
void ShmPlane::check_peers(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) const {
  for (const SendSpec& s : sends)
    if (closed(s.peer)) throw std::runtime_error(closed_text(s.peer));
  for (const RecvSpec& r : recvs)
    if (closed(r.peer)) throw std::runtime_error(closed_text(r.peer));
}

void ShmPlane::abandon(Batch& b, const std::string& why) {
  cancel(b);
  throw std::runtime_error(why);
}

// Reaps completed requests, progresses the worker, and sleeps on its event fd, interrupt()'s wake-up
// and the peers' sockets until every request of the batch is done.
void ShmPlane::wait(Batch& b, ms timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<pollfd> fds;
  std::vector<int> rank_of, seen_closed;
  for (;;) {
    for (size_t i = 0; i < b.size();) {
      const ucs_status_t st = ucp_request_check_status(b[i].request);
      if (st == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      const Pending done = b[i];
      ucp_request_free(done.request);
      b.erase(b.begin() + long(i));
      const RecvSpec* r = done.recv;
      if (st == UCS_ERR_MESSAGE_TRUNCATED && r)
        abandon(b, "rank " + std::to_string(r->peer) + " sent more than the " + std::to_string(r->bytes) +
                    " bytes expected with tag " + std::to_string(r->tag));
      if (st != UCS_OK) abandon(b, std::string(r ? "receive: " : "send: ") + status_text(st));
      if (r && *done.length != r->bytes)
        abandon(b, "rank " + std::to_string(r->peer) + " sent " + std::to_string(*done.length) + " bytes with tag " +
                    std::to_string(r->tag) + ", expected " + std::to_string(r->bytes));
    }
    if (b.empty()) return;
    if (interrupted_) abandon(b, "interrupted");
    if (ucp_worker_progress(w_->worker)) continue;
    const ucs_status_t armed = ucp_worker_arm(w_->worker);
    if (armed == UCS_ERR_BUSY) continue;
    if (armed != UCS_OK) abandon(b, "ucp_worker_arm: " + status_text(armed));
    const auto left = std::chrono::duration_cast<ms>(deadline - std::chrono::steady_clock::now()).count() + 1;
    if (left <= 0) abandon(b, "Timed out waiting " + std::to_string(timeout.count()) + " ms for the peers");
    // sleep on the worker's event fd and the sockets of the peers this batch still waits on (a
    // peer whose part is done may close without failing this call, as a Gloo pair would)
    fds.assign(1, {w_->efd, POLLIN, 0});
    rank_of.assign(1, -1);
    for (const Pending& p : b)
      if (p.peer >= 0 && size_t(p.peer) < peer_fds_.size() && peer_fds_[size_t(p.peer)] >= 0 &&
          std::find(rank_of.begin(), rank_of.end(), p.peer) == rank_of.end())
        fds.push_back({peer_fds_[size_t(p.peer)], POLLRDHUP, 0}), rank_of.push_back(p.peer);
    const int n = ::poll(fds.data(), nfds_t(fds.size()), int(std::min<int64_t>(left, INT_MAX)));
    if (n < 0 && errno != EINTR) abandon(b, std::string("poll: ") + std::strerror(errno));
    // A closed socket fails the batch only if the worker, progressed to the end since it was first
    // seen, still has no data from that peer: what a peer sent before it closed is already here.
    for (size_t i = 1; n > 0 && i < fds.size(); ++i)
      if (fds[i].revents & kClosed) {
        if (std::find(seen_closed.begin(), seen_closed.end(), rank_of[i]) != seen_closed.end())
          abandon(b, closed_text(rank_of[i]));
        seen_closed.push_back(rank_of[i]);
      }
  }
}

// Cancels what is still in flight. Sends are released at once (UCX only reads from their
// buffers, and a send to a dead or departed peer may never complete). Receives are progressed until
// each has completed (one cancelled mid-transfer completes when its data is in), so no later
// progress writes into the caller's buffers; after kCancelGrace, what remains is abandoned to the
// worker's destruction.
void ShmPlane::cancel(Batch& b) {
  for (const Pending& p : b) ucp_request_cancel(w_->worker, p.request);
  for (size_t i = 0; i < b.size();) {
    if (b[i].recv) {
      ++i;
      continue;
    }
    ucp_request_free(b[i].request);
    b.erase(b.begin() + long(i));
  }
  const auto until = std::chrono::steady_clock::now() + kCancelGrace;
  while (!b.empty() && std::chrono::steady_clock::now() < until) {
    (void)ucp_worker_progress(w_->worker);
    for (size_t i = 0; i < b.size();) {
      if (ucp_request_check_status(b[i].request) == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      ucp_request_free(b[i].request);
      b.erase(b.begin() + long(i));
    }
  }
  b.clear();
}

}  // namespace sal::comm

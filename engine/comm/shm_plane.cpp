// shm_plane.cpp — see shm_plane.h.
#include "comm/shm_plane.h"

#include <gloo/rendezvous/store.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <ucp/api/ucp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <stdexcept>

#include "comm/shm_prefault.h"
#include "comm/shm_sweep.h"

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
// The plane's first calls after which the segments mapped since are populated in bulk: UCX maps a
// peer's message descriptors only when this rank first writes into one (shm_prefault.h).
constexpr int kPrefaultCalls = 4;
// After an error, how long cancelled receives get to complete before they are abandoned.
constexpr auto kCancelGrace = ms(50);
// While a send is pending, the longest a wait sleeps before progressing the worker again.
constexpr auto kSendPoll = ms(1);
constexpr const char* kRecordMagic = "SALSHM1";

// Tag: kind (8 bits) | sender rank (16 bits) | unused (8 bits) | the caller's tag (32 bits).
uint64_t make_tag(ShmPlane::Kind kind, int sender, uint32_t tag) {
  return (uint64_t(kind) << 56) | (uint64_t(uint16_t(sender)) << 40) | tag;
}

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

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
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    p.mt_workers_shared = 1;  // the next epoch's worker is created on another thread
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
    p.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread at a time (mu_); give_up() from others only signals
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

namespace {

// The worker the next epoch will use, created in the background after a connect (creating one
// takes 4 ms on an idle core, 20-40 ms while eight workers start theirs on two cores).
std::mutex g_spare_mu;
std::future<Result<std::unique_ptr<ShmPlane::Worker>>> g_spare;

int pidfd_of(pid_t pid) { return int(::syscall(SYS_pidfd_open, pid, 0)); }

// Readable once the process has exited.
bool exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL));
}

}  // namespace

// A rank's record: "SALSHM1", its host identity, its pid, its worker's address (absent where UCX
// cannot start).
struct ShmPlane::Record {
  std::string host;
  pid_t pid = 0;
  std::vector<char> address;

  std::vector<char> encode() const {
    std::string head = std::string(kRecordMagic) + '\0' + host + '\0' + std::to_string(pid) + '\0';
    std::vector<char> out(head.begin(), head.end());
    out.insert(out.end(), address.begin(), address.end());
    return out;
  }
  // Empty host when it is not a record.
  static Record decode(const std::vector<char>& bytes) {
    Record r;
    std::vector<std::string> fields;
    size_t at = 0;
    for (int i = 0; i < 3; ++i) {
      const auto end = std::find(bytes.begin() + long(at), bytes.end(), '\0');
      if (end == bytes.end()) return {};
      fields.emplace_back(bytes.begin() + long(at), end);
      at = size_t(end - bytes.begin()) + 1;
    }
    if (fields[0] != kRecordMagic) return {};
    r.host = fields[1];
    r.pid = pid_t(std::atoll(fields[2].c_str()));
    r.address.assign(bytes.begin() + long(at), bytes.end());
    return r;
  }
};

namespace {

// Workers of epochs this process has left, kept until it has connected a newer one: a peer still
// connecting to the old epoch (slower than us to get there) must find our queue to attach to,
// and then learns from our notice that we gave up, instead of failing to connect.
std::mutex g_retired_mu;
std::vector<std::unique_ptr<ShmPlane::Worker>> g_retired;

}  // namespace

void ShmPlane::retire_old_workers() {
  std::vector<std::unique_ptr<Worker>> old;
  {
    std::lock_guard<std::mutex> lock(g_retired_mu);
    old.swap(g_retired);
  }
}

Result<std::unique_ptr<ShmPlane::Worker>> ShmPlane::take_worker() {
  std::lock_guard<std::mutex> lock(g_spare_mu);
  if (g_spare.valid()) return g_spare.get();
  return Worker::create();
}

// Its own receive queue is mapped in bulk there too, off the connect's path (shm_prefault.h).
void ShmPlane::prepare_spare() {
  std::lock_guard<std::mutex> lock(g_spare_mu);
  if (!g_spare.valid())
    g_spare = std::async(std::launch::async, [] {
      auto w = Worker::create();
      if (w) prefault_segments(kUcxSegmentPrefix);
      return w;
    });
}

namespace {

// The peers' queues (and this worker's, unless its spare did it) mapped in bulk, now rather than a
// fault a page in the first steps (shm_prefault.h).
void prefault_queues() {
  const auto t0 = std::chrono::steady_clock::now();
  const Prefaulted p = prefault_segments(kUcxSegmentPrefix);
  if (p.mappings > 0)
    spdlog::debug("shared memory: {} segment mapping(s), {:.1f} MB, mapped in bulk in {:.1f} ms", p.mappings,
                  double(p.bytes) / 1048576.0,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

Result<std::unique_ptr<ShmPlane>> ShmPlane::connect(int rank, int size, gloo::rendezvous::Store& store,
                                                    int64_t timeout_ms) {
  auto worker = take_worker();  // a failure here only means this rank offers no address
  Record mine{host_identity(), ::getpid(), {}};
  if (worker) {
    const char* a = reinterpret_cast<const char*>((*worker)->address);
    mine.address.assign(a, a + (*worker)->address_len);
  }
  // 1. every rank's record; the plane only if every one is on this host with an address
  std::vector<Record> all(static_cast<size_t>(size));
  bool local = worker.ok();
  try {
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("sal-shm/" + std::to_string(r));
    store.set(keys[size_t(rank)], mine.encode());
    store.wait(keys, ms(timeout_ms));
    for (int r = 0; r < size; ++r) {
      all[size_t(r)] = r == rank ? mine : Record::decode(store.get(keys[size_t(r)]));
      local = local && all[size_t(r)].host == mine.host && !all[size_t(r)].address.empty();
    }
  } catch (const std::exception& e) {
    return fail("shared-memory rendezvous: ", e.what());
  }
  if (!local) return std::unique_ptr<ShmPlane>();
  // 2. endpoints, and a pidfd of each peer's process
  auto& w = **worker;
  w.eps.assign(size_t(size), nullptr);
  std::vector<int> pidfds(size_t(size), -1);
  std::string problem;
  for (int r = 0; r < size && problem.empty(); ++r) {
    if (r == rank) continue;
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address = reinterpret_cast<const ucp_address_t*>(all[size_t(r)].address.data());
    if (ucs_status_t s = ucp_ep_create(w.worker, &p, &w.eps[size_t(r)]); s != UCS_OK) {
      w.eps[size_t(r)] = nullptr;
      problem = "shared memory to rank " + std::to_string(r) + ": " + status_text(s);
    }
    pidfds[size_t(r)] = pidfd_of(all[size_t(r)].pid);
    if (problem.empty() && pidfds[size_t(r)] < 0)
      problem = "pidfd_open of rank " + std::to_string(r) + " (pid " + std::to_string(all[size_t(r)].pid) +
                "): " + std::strerror(errno);
  }
  std::unique_ptr<ShmPlane> plane(new ShmPlane(rank, std::move(*worker), std::move(pidfds)));
  if (!problem.empty()) {  // a peer is gone already: the epoch is over; tell the others
    plane->give_up();
    return fail(problem);
  }
  // 3. wire-up done before the plane is used
  try {
    plane->flush(ms(timeout_ms));
  } catch (const std::exception& e) {
    return fail("shared memory: ", e.what());
  }
  plane->listen_for_notices();
  retire_old_workers();
  prefault_queues();
  prepare_spare();
  return plane;
}

ShmPlane::ShmPlane(int rank, std::unique_ptr<Worker> w, std::vector<int> pidfds)
    : rank_(rank), w_(std::move(w)), pidfds_(std::move(pidfds)), gave_up_(pidfds_.size(), 0) {}

ShmPlane::~ShmPlane() {
  if (notice_request_) {
    ucp_request_cancel(w_->worker, notice_request_);
    ucp_request_free(notice_request_);
  }
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  std::lock_guard<std::mutex> lock(g_retired_mu);
  g_retired.push_back(std::move(w_));  // until this process connects a newer epoch
}

namespace {

// The length a receive got, filled by its completion callback.
void on_received(void*, ucs_status_t, const ucp_tag_recv_info_t* info, void* user_data) {
  *static_cast<size_t*>(user_data) = info->length;
}

// The sender's tag of a notice.
void on_notice(void*, ucs_status_t, const ucp_tag_recv_info_t* info, void* user_data) {
  *static_cast<uint64_t*>(user_data) = info->sender_tag;
}

int sender_of(uint64_t tag) { return int((tag >> 40) & 0xFFFF); }

}  // namespace

// Completes every endpoint's wire-up now (each rank progresses its worker while it flushes, so the
// peers' handshakes are answered): a message sent on an endpoint still wiring up waits in the
// sender's queue for the sender's progress, and a rank that gives up on the epoch progresses no
// more.
void ShmPlane::flush(ms timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  Batch b;
  for (size_t r = 0; r < w_->eps.size(); ++r) {
    if (!w_->eps[r]) continue;
    ucp_request_param_t p{};
    void* req = ucp_ep_flush_nbx(w_->eps[r], &p);
    if (UCS_PTR_IS_ERR(req)) abandon(b, "flushing the endpoint to rank " + std::to_string(r) + ": " + status_text(UCS_PTR_STATUS(req)));
    if (req) b.push_back({req, nullptr, nullptr, int(r)});
  }
  wait(b, timeout);
}

// The standing receive of the peers' notices (any sender); reposted after each.
void ShmPlane::listen_for_notices() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = on_notice;
  p.user_data = &notice_from_;
  void* req = ucp_tag_recv_nbx(w_->worker, &notice_buf_, 1, make_tag(Kind::notice, 0, 0), uint64_t(0xFF) << 56, &p);
  notice_request_ = UCS_PTR_IS_ERR(req) ? nullptr : req;
}

bool ShmPlane::ended(int peer) {
  if (peer < 0 || size_t(peer) >= pidfds_.size()) return false;
  while (notice_request_ && ucp_request_check_status(notice_request_) != UCS_INPROGRESS) {
    const int from = sender_of(notice_from_);
    if (from >= 0 && size_t(from) < gave_up_.size()) gave_up_[size_t(from)] = 1;
    ucp_request_free(notice_request_);
    listen_for_notices();
  }
  return gave_up_[size_t(peer)] || (pidfds_[size_t(peer)] >= 0 && exited(pidfds_[size_t(peer)]));
}

std::string ShmPlane::ended_text(int peer) const {
  return gave_up_[size_t(peer)] ? "rank " + std::to_string(peer) + " gave up on the epoch"
                                : "rank " + std::to_string(peer) + " died";
}

void ShmPlane::check_peers(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) {
  (void)ucp_worker_progress(w_->worker);  // a notice already in the queue
  for (const SendSpec& s : sends)
    if (ended(s.peer)) throw std::runtime_error(ended_text(s.peer));
  for (const RecvSpec& r : recvs)
    if (ended(r.peer)) throw std::runtime_error(ended_text(r.peer));
}

// One byte to every peer: this rank is out of the epoch. Eager messages land in the peers' queues
// at once; requests that do not complete are released (a dead peer never takes its message).
void ShmPlane::send_notices() {
  if (noticed_) return;
  noticed_ = true;
  static const char one = 1;
  for (size_t r = 0; r < w_->eps.size(); ++r) {
    if (!w_->eps[r] || ended(int(r))) continue;
    ucp_request_param_t p{};
    void* req = ucp_tag_send_nbx(w_->eps[r], &one, 1, make_tag(Kind::notice, rank_, 0), &p);
    if (req && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
  }
}

void ShmPlane::give_up() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) return send_notices();
  interrupted_ = true;  // the call in flight wakes, sends them and fails
  (void)ucp_worker_signal(w_->worker);
}

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

Result<int> ShmPlane::narrow(const std::vector<int>& members) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!members_.empty()) return fail("the plane was narrowed already");
  std::vector<char> seen(pidfds_.size(), 0);
  int place = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    if (r < 0 || size_t(r) >= pidfds_.size())
      return fail("member ", i, " is rank ", r, ", not one of the plane's ", pidfds_.size());
    if (seen[size_t(r)]++) return fail("rank ", r, " is named twice");
    if (r == rank_) place = int(i);
  }
  if (place < 0) return fail("the members do not include this rank (", rank_, ")");
  members_ = members;
  return place;
}

template <class Spec>
std::vector<Spec> ShmPlane::connected(const std::vector<Spec>& specs) const {
  std::vector<Spec> out(specs);
  if (members_.empty()) return out;
  for (Spec& s : out) {
    if (s.peer < 0 || size_t(s.peer) >= members_.size())
      throw std::runtime_error("peer " + std::to_string(s.peer) + " of " + std::to_string(members_.size()));
    s.peer = members_[size_t(s.peer)];
  }
  return out;
}

void ShmPlane::transfer(Kind kind, const std::vector<SendSpec>& sends_in, const std::vector<RecvSpec>& recvs_in,
                        ms timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto sends = connected(sends_in);
  const auto recvs = connected(recvs_in);
  Batch b;
  try {
    if (interrupted_) throw std::runtime_error("interrupted");
    check_peers(sends, recvs);
    std::vector<size_t> received(recvs.size(), 0);
    for (size_t i = 0; i < recvs.size(); ++i) post_recv(b, kind, recvs[i], &received[i]);
    for (const SendSpec& s : sends) post_send(b, kind, s, false);
    wait(b, timeout);
  } catch (...) {
    send_notices();
    throw;
  }
  mapped_since();
}

// A peer's descriptors are mapped here on this rank's first write into them: a page fault a page
// from then on, unless populated now (shm_prefault.h). The plane's first calls reach most peers.
void ShmPlane::mapped_since() {
  if (calls_ >= kPrefaultCalls) return;
  ++calls_;
  prefault_queues();
}

// Headers first, then a "ready" from each receiver, then the payloads: a receiver whose header
// agrees posts the payload's receive and only then tells the sender to go, so every payload lands
// in a posted receive. Sent at once, as it once was, a payload arrived before its receive and UCX
// held it as unexpected data while the receiver still waited for other ranks' headers; with 16
// ranks each moving 25-50 MB at once that stalled the exchange until its timeout. On a mismatch the
// receiver names both sizes and never says ready; its notice fails the sender's wait for it.
void ShmPlane::exchange(const std::vector<SendSpec>& sends_in, const std::vector<RecvSpec>& recvs_in, ms timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto sends = connected(sends_in);
  const auto recvs = connected(recvs_in);
  Batch headers, ready, rest;
  static const char go = 1;
  try {
    if (interrupted_) throw std::runtime_error("interrupted");
    check_peers(sends, recvs);
    std::vector<ExchangeHeader> in(recvs.size()), out(sends.size());
    std::vector<RecvSpec> in_specs, ready_in;
    std::vector<SendSpec> out_specs, ready_out;
    std::vector<char> ready_buf(sends.size(), 0);
    for (size_t i = 0; i < recvs.size(); ++i) {
      in_specs.push_back({recvs[i].peer, &in[i], sizeof(ExchangeHeader), recvs[i].tag});
      ready_out.push_back({recvs[i].peer, &go, 1, recvs[i].tag});
    }
    for (size_t i = 0; i < sends.size(); ++i) {
      out[i].tag = sends[i].tag;
      out[i].bytes = sends[i].bytes;
      out_specs.push_back({sends[i].peer, &out[i], sizeof(ExchangeHeader), sends[i].tag});
      ready_in.push_back({sends[i].peer, &ready_buf[i], 1, sends[i].tag});
    }
    std::vector<size_t> header_len(recvs.size(), 0), ready_len(sends.size(), 0), received(recvs.size(), 0);
    for (size_t i = 0; i < recvs.size(); ++i) post_recv(headers, Kind::p2p_header, in_specs[i], &header_len[i]);
    for (size_t i = 0; i < sends.size(); ++i) post_recv(ready, Kind::p2p_ready, ready_in[i], &ready_len[i]);
    for (size_t i = 0; i < sends.size(); ++i) post_send(rest, Kind::p2p_header, out_specs[i], false);
    try {
      wait(headers, timeout);
      for (size_t i = 0; i < recvs.size(); ++i) {
        const ExchangeHeader& h = in[i];
        if (h.magic != ExchangeHeader::kMagic || h.tag != recvs[i].tag || h.bytes != recvs[i].bytes)
          abandon(headers, "rank " + std::to_string(recvs[i].peer) + " sent " + std::to_string(h.bytes) +
                               " bytes with tag " + std::to_string(h.tag) + ", expected " +
                               std::to_string(recvs[i].bytes) + " bytes with tag " + std::to_string(recvs[i].tag));
        post_recv(rest, Kind::p2p, recvs[i], &received[i]);
        post_send(rest, Kind::p2p_ready, ready_out[i], false);
      }
      wait(ready, timeout);
    } catch (...) {
      cancel(ready);
      cancel(rest);
      throw;
    }
    for (const SendSpec& s : sends) post_send(rest, Kind::p2p, s, false);
    wait(rest, timeout);
  } catch (...) {
    send_notices();
    throw;
  }
  mapped_since();
}

void ShmPlane::abandon(Batch& b, const std::string& why) {
  cancel(b);
  throw std::runtime_error(why);
}

// Reaps completed requests, progresses the worker, and sleeps on its event fd (which give_up()'s
// signal also wakes) and the pidfds of the peers the batch still waits on, until every request is
// done.
void ShmPlane::wait(Batch& b, ms timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<pollfd> fds;
  std::vector<int> rank_of, seen_ended;
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
    // A peer that ended fails the batch only if the worker, progressed to the end since that was
    // first seen, still waits on it: what it sent before it ended is already in the queue.
    for (const Pending& p : b)
      if (ended(p.peer)) {
        if (std::find(seen_ended.begin(), seen_ended.end(), p.peer) != seen_ended.end()) abandon(b, ended_text(p.peer));
        seen_ended.push_back(p.peer);
      }
    if (!seen_ended.empty()) {
      (void)ucp_worker_progress(w_->worker);
      continue;
    }
    const ucs_status_t armed = ucp_worker_arm(w_->worker);
    if (armed == UCS_ERR_BUSY) continue;
    if (armed != UCS_OK) abandon(b, "ucp_worker_arm: " + status_text(armed));
    const auto left = std::chrono::duration_cast<ms>(deadline - std::chrono::steady_clock::now()).count() + 1;
    if (left <= 0) abandon(b, "Timed out waiting " + std::to_string(timeout.count()) + " ms for the peers");
    // sleep on the worker's event fd (notices arrive through it too) and the pidfds of the peers
    // this batch still waits on
    fds.assign(1, {w_->efd, POLLIN, 0});
    rank_of.assign(1, -1);
    for (const Pending& p : b)
      if (p.peer >= 0 && pidfds_[size_t(p.peer)] >= 0 && std::find(rank_of.begin(), rank_of.end(), p.peer) == rank_of.end())
        fds.push_back({pidfds_[size_t(p.peer)], POLLIN, 0}), rank_of.push_back(p.peer);
    // A send that waits for room in a peer's queue moves on only through our own progress, and UCX
    // wakes the worker for arrivals, not for room: while a send is pending, look again soon.
    const bool sending = std::any_of(b.begin(), b.end(), [](const Pending& p) { return p.recv == nullptr; });
    const int64_t sleep_ms = std::min<int64_t>(left, sending ? kSendPoll.count() : INT_MAX);
    const int n = ::poll(fds.data(), nfds_t(fds.size()), int(sleep_ms));
    if (n < 0 && errno != EINTR) abandon(b, std::string("poll: ") + std::strerror(errno));
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

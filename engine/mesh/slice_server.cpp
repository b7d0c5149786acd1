// slice_server.cpp — see slice_server.h.
#include "mesh/slice_server.h"

#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "ckpt/slice_frames.h"
#include "core/clock.h"
#include "core/thread_name.h"
#include "mesh/endpoint.h"
#include "mesh/security.h"
#include "mesh/zmq_uv.h"
#include "wire/unit_refs.h"

namespace sal::mesh {
namespace {

// A slot is a few frames of up to a unit's floats; bounded by the budget, not the control limit.
constexpr int64_t kSliceFrameMax = int64_t(1) << 31;
constexpr int kSliceQueue = 4096;  // messages: a fetch answers a window at once
// The endpoint's thread looks at its stop flag at least this often.
constexpr int64_t kStopPollMs = 50;

}  // namespace

Result<std::unique_ptr<SliceServer>> SliceServer::open(uv_loop_t* loop, const std::string& host,
                                                       const std::string& key_file) {
  std::unique_ptr<SliceServer> s(new SliceServer());
  s->sock_.set(zmq::sockopt::maxmsgsize, kSliceFrameMax);
  s->sock_.set(zmq::sockopt::linger, 0);
  s->sock_.set(zmq::sockopt::sndhwm, kSliceQueue);
  s->sock_.set(zmq::sockopt::rcvhwm, kSliceQueue);
  const std::string want = "tcp://" + host + ":*";
  if (!wire::is_local_endpoint(want)) {
    if (key_file.empty()) return fail(want, " is not local: the slice endpoint needs CURVE (the agent's --key)");
    auto own = wire::load_key_file(key_file);
    if (!own) return own.error().with_context(key_file);
    if (own->secret_key.empty()) return fail(key_file, " holds no secret-key");
    s->zap_ = std::make_unique<ZapHandler>(s->ctx_, Allowlist{});  // before the socket takes a handshake
    wire::make_curve_server(s->sock_, *own, kSliceDomain);
    s->public_key_ = own->public_key;
  }
  auto ep = bind_endpoint(s->sock_, want);
  if (!ep) return ep.error().with_context("the slice endpoint");
  s->endpoint_ = *ep;
  if (const char* c = std::getenv("SAL_TEST_CORRUPT_SLICE")) {
    std::string hook = c;
    auto at = hook.find('@');
    s->corrupt_unit_ = hook.substr(0, at);
    if (at != std::string::npos) s->corrupt_node_ = hook.substr(at + 1);
  }
  s->async_ = new uv_async_t;
  uv_async_init(loop, s->async_, [](uv_async_t* h) {
    if (auto* self = static_cast<SliceServer*>(h->data)) self->deliver();
  });
  s->async_->data = s.get();
  uv_unref(reinterpret_cast<uv_handle_t*>(s->async_));  // reports wake the loop; they do not keep it running
  s->thread_ = std::thread([self = s.get()] { self->run(); });
  return s;
}

SliceServer::SliceServer() : sock_(ctx_, zmq::socket_type::router) {}

void SliceServer::set_allowlist(Allowlist allow) {
  if (zap_) zap_->set_allowlist(std::move(allow));
}

SliceServer::~SliceServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (async_) {
    async_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(async_), [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
  }
}

void SliceServer::set_node(uint32_t node) {
  std::lock_guard<std::mutex> lock(mu_);
  node_ = node;
}

void SliceServer::set_mac_key(const ckpt::SliceMacKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  mac_key_ = key;
}

void SliceServer::set_budget(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > 0) store_.set_budget(bytes);
}

// The endpoint's thread: every message as it comes, and a report held back by the interval sent
// when the interval is over.
void SliceServer::run() {
  name_this_thread("sal-slices");
  while (!stop_) {
    int64_t wait_ms = kStopPollMs;
    if (held_back_) wait_ms = std::clamp<int64_t>(kReportEveryMs - (mono_ns() - last_report_ns_) / 1'000'000, 0, wait_ms);
    zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::warn("slice endpoint: {}", e.what());
    }
    if (item.revents & ZMQ_POLLIN) on_message();
    if (held_back_ && (mono_ns() - last_report_ns_) / 1'000'000 >= kReportEveryMs) send_report("");
  }
}

void SliceServer::deliver() {
  std::deque<wire::SliceReport> reports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reports.swap(outbox_);
  }
  for (const auto& r : reports)
    if (on_report) on_report(r);
}

void SliceServer::on_message() {
  wire::Parts parts;
  if (!recv_now(sock_, parts) || parts.size() < 2) return;
  std::string rid(static_cast<const char*>(parts[0].data()), parts[0].size());
  parts.erase(parts.begin());
  wire::Parts head;  // a SlicePut's float frames follow its body
  head.emplace_back(parts[0].data(), parts[0].size());
  head.emplace_back(parts[1].data(), parts[1].size());
  auto env = wire::open(head);
  if (!env) return spdlog::warn("slice endpoint: {}", env.error().message());
  if (env->type == wire::MsgType::slice_put) return put(std::move(parts));
  if (env->type == wire::MsgType::slice_fetch) {
    auto f = wire::decode<wire::SliceFetch>(*env);
    if (!f) return spdlog::warn("slice endpoint: {}", f.error().message());
    return fetch(rid, *f);
  }
  spdlog::warn("slice endpoint: unexpected {}", wire::type_name(env->type));
}

void SliceServer::put(wire::Parts parts) {
  std::optional<ckpt::SliceMacKey> key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    key = mac_key_;
  }
  if (!key) return changed("a slice refused: the job's slice key is not known here yet");
  if (auto s = ckpt::unseal(parts, *key); !s) return changed("a slice refused: " + s.error().message());
  auto d = ckpt::decode_slot(parts);
  if (!d) return changed("a slice refused: " + d.error().message());
  if (d->head.log_only) {
    std::string refused;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto st = add_log(std::move(*d)); !st) refused = st.error().message();
    }
    if (!refused.empty()) changed(refused);
    return;
  }
  ckpt::Writer w{d->head.writer_node, d->head.writer_index};
  const uint64_t step = d->head.step;
  std::vector<UnitId> hook;  // the test hook's unit, if this slot has it
  if (!corrupt_unit_.empty())
    for (const auto& [id, copy] : d->slot.units)
      if (id.name() == corrupt_unit_) hook.push_back(id);
  bool completes = d->head.index + 1 == d->head.schedule.window;
  std::string refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto st = store_.add(w, d->head.plan, d->head.schedule, std::move(d->slot)); !st)
      refused = st.error().message();
    else if (!corrupt_unit_.empty() && (corrupt_node_.empty() || corrupt_node_ == std::to_string(node_)))
      corrupt_for_test(w, step, hook);
  }
  if (!refused.empty()) return changed(refused);
  if (completes) changed();
}

Status SliceServer::add_log(ckpt::DecodedSlot d) {
  ckpt::Writer w{d.head.writer_node, d.head.writer_index};
  return store_.add_log(w, d.head.step, d.head.schedule,
                        ckpt::HeldLog{d.head.plan, std::move(d.log)});
}

// Flips a bit of the unit's weights in the copy just stored (its checksum no longer matches). Under mu_.
void SliceServer::corrupt_for_test(const ckpt::Writer& w, uint64_t step, const std::vector<UnitId>& ids) {
  for (const UnitId& id : ids) {
    ckpt::UnitCopy* held = store_.find(w, step, id);
    if (!held || held->w.empty()) continue;
    uint32_t bits;
    std::memcpy(&bits, &held->w[0], sizeof bits);
    bits ^= 1u;
    std::memcpy(&held->w[0], &bits, sizeof bits);
    spdlog::warn("test hook: corrupted {} in the slot of iteration {} from {}", id.name(), step, w.name());
  }
}

void SliceServer::fetch(const std::string& rid, const wire::SliceFetch& f) {
  if (!f.log_units.empty()) return fetch_logs(rid, f);
  std::set<UnitId> wanted;
  for (const auto& u : f.units) wanted.insert(UnitId{UnitKind(u.kind), u.layer, u.expert});
  std::vector<UnitId> missing;
  wire::SlicePut head;
  head.request = f.request;
  std::vector<wire::Parts> encoded;  // the slots' frames, copied out under the lock (views point into the store)
  {
    std::lock_guard<std::mutex> lock(mu_);
    head.writer_node = node_;
    for (const auto& slot : store_.window_slots(f.window_from, wanted, &missing)) {
      encoded.push_back(ckpt::encode_slot(head, slot));
      if (mac_key_) ckpt::seal(encoded.back(), *mac_key_);
    }
  }
  for (auto& parts : encoded) send(rid, std::move(parts));
  wire::SliceDone done{f.request, uint32_t(encoded.size()), ""};
  if (!missing.empty()) {
    done.detail = std::to_string(missing.size()) + " units not held in a complete window from iteration " +
                  std::to_string(f.window_from) + " (first: " + missing.front().name() + ")";
  }
  send(rid, wire::encode(done));
}

// Every log held of the iterations asked for, each with only the experts asked for and the layers'
// tokens they use (a log that sent them nothing is answered too, empty: the writer's iteration is
// known).
void SliceServer::fetch_logs(const std::string& rid, const wire::SliceFetch& f) {
  std::set<std::pair<int, int>> experts;
  for (const auto& u : f.log_units) experts.insert({u.layer, u.expert});
  std::vector<wire::Parts> encoded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [writer, step, held] : store_.logs(f.logs_from, f.logs_to)) {
      wire::SlicePut head;
      head.request = f.request, head.writer_node = writer.node, head.writer_index = writer.index;
      head.plan = held->plan, head.step = step;
      ckpt::LogView view;
      std::set<model::TokenKey> layers;
      for (const auto& [key, r] : held->log.rows)
        if (experts.count({key.layer, key.expert})) view.rows.emplace_back(key, &r), layers.insert({key.pass, key.layer});
      for (const auto& [key, t] : held->log.tokens)
        if (layers.count(key)) view.tokens.emplace_back(key, &t);
      encoded.push_back(ckpt::encode_log(head, view));
      if (mac_key_) ckpt::seal(encoded.back(), *mac_key_);
    }
  }
  for (auto& parts : encoded) send(rid, std::move(parts));
  send(rid, wire::encode(wire::SliceDone{f.request, uint32_t(encoded.size()), ""}));
}

void SliceServer::send(const std::string& rid, wire::Parts parts) {
  parts.insert(parts.begin(), zmq::message_t(rid.data(), rid.size()));
  try {
    if (!zmq::send_multipart(sock_, parts, zmq::send_flags::dontwait)) spdlog::warn("slice endpoint: send queue full");
  } catch (const zmq::error_t& e) {
    spdlog::warn("slice endpoint: {}", e.what());
  }
}

wire::SliceReport SliceServer::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return report_locked();
}

wire::SliceReport SliceServer::report_locked() const {
  wire::SliceReport r{node_, store_.bytes(), store_.budget(), {}, refused_, "", store_.log_bytes()};
  for (const auto& h : store_.windows()) {
    wire::SliceWindow w{h.writer.node, h.writer.index, h.plan, h.from, h.to, {}};
    for (const auto& id : h.units) w.units.push_back(wire::unit_ref(id));
    r.windows.push_back(std::move(w));
  }
  return r;
}

void SliceServer::changed(const std::string& refusal) {
  if (!refusal.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++refused_;
    }
    spdlog::warn("slice endpoint: {}", refusal);
    return send_report(refusal);
  }
  int64_t since_ms = (mono_ns() - last_report_ns_) / 1'000'000;
  if (since_ms >= kReportEveryMs) return send_report("");
  held_back_ = true;  // run() sends it when the interval is over
}

void SliceServer::send_report(const std::string& refusal) {
  held_back_ = false;
  last_report_ns_ = mono_ns();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto r = report_locked();
    r.refusal = refusal;
    outbox_.push_back(std::move(r));
  }
  uv_async_send(async_);
}

}  // namespace sal::mesh

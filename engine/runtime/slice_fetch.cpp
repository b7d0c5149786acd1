// slice_fetch.cpp — see slice_fetch.h.
#include "runtime/slice_fetch.h"

#include <zmq_addon.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "ckpt/slice_frames.h"
#include "ckpt/slice_mac.h"
#include "core/clock.h"
#include "core/strings.h"
#include "wire/curve.h"
#include "wire/unit_refs.h"

namespace sal::runtime {
namespace {

// How often a fetch waiting for an answer asks whether it was stopped.
constexpr int64_t kStopPollMs = 10;

// A holder's answer: each unit's copies by slot index, and the slots' iterations and norms.
struct Answer {
  std::map<UnitId, std::map<uint32_t, ckpt::UnitCopy>> copies;
  std::map<uint32_t, std::pair<uint64_t, double>> slots;  // index -> (iteration, grad norm)
  uint32_t window = 0;
  std::string problem;  // the holder did not answer in full, or sent something malformed
};

class Fetcher {
 public:
  Fetcher(zmq::context_t& ctx, const wire::PlanUpdate& p, const ModelShape& shape, std::string key_file,
          std::optional<ckpt::SliceMacKey> mac_key, int timeout_ms, const std::function<bool()>& stopped)
      : ctx_(ctx), p_(p), shape_(shape), key_file_(std::move(key_file)), mac_key_(mac_key), timeout_ms_(timeout_ms),
        stopped_(stopped) {}
  bool stopped() const { return stopped_ && stopped_(); }

  Answer ask(uint32_t node, const std::vector<UnitId>& units) {
    Answer a;
    zmq::socket_t* s = socket(node, a.problem);
    if (!s) return a;
    wire::SliceFetch f{++request_, uint64_t(p_.restore_window), {}};
    for (const auto& id : units) f.units.push_back(wire::unit_ref(id));
    if (!zmq::send_multipart(*s, wire::encode(f), zmq::send_flags::dontwait)) {
      a.problem = "its endpoint took no request";
      return a;
    }
    int64_t deadline = mono_ns() + int64_t(timeout_ms_) * 1'000'000;
    for (;;) {
      int64_t left_ms = (deadline - mono_ns()) / 1'000'000;
      if (stopped()) {
        a.problem = "stopped";
        return a;
      }
      if (left_ms <= 0) {
        a.problem = "no answer within " + std::to_string(timeout_ms_) + " ms";
        return a;
      }
      zmq::pollitem_t item{s->handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(std::min<int64_t>(left_ms, kStopPollMs))) == 0) continue;
      wire::Parts parts;
      if (!zmq::recv_multipart(*s, std::back_inserter(parts), zmq::recv_flags::dontwait)) continue;
      if (take(parts, f.request, a)) return a;
    }
  }

 private:
  // One message of the answer; true when the answer is over.
  bool take(wire::Parts& parts, uint64_t request, Answer& a) {
    if (parts.size() == 2) {
      auto env = wire::open(parts);
      if (!env) return a.problem = env.error().message(), true;
      auto done = wire::decode<wire::SliceDone>(*env);
      if (!done) return a.problem = done.error().message(), true;
      if (done->request != request) return false;  // a late answer to an earlier request
      a.window = std::max(a.window, done->slots);  // one SlicePut per slot of the window
      if (!done->detail.empty()) a.problem = done->detail;
      return true;
    }
    if (!mac_key_) return a.problem = "the job's slice key is not known", true;
    if (auto st = ckpt::unseal(parts, *mac_key_); !st) return a.problem = st.error().message(), true;
    auto d = ckpt::decode_slot(parts, shape_);
    if (!d) return a.problem = d.error().message(), true;
    if (d->head.request != request) return false;
    a.window = std::max(a.window, d->head.index + 1);
    a.slots[d->head.index] = {d->head.step, d->head.grad_norm};
    for (auto& [id, copy] : d->slot.units) a.copies[id][d->head.index] = std::move(copy);
    return false;
  }

  zmq::socket_t* socket(uint32_t node, std::string& problem) {
    auto it = sockets_.find(node);
    if (it != sockets_.end()) return it->second.get();
    const wire::SliceNode* sn = nullptr;
    for (const auto& n : p_.slice_nodes)
      if (n.node == node) sn = &n;
    if (!sn) return problem = "the plan gives no endpoint for it", nullptr;
    auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    if (auto st = wire::curve_client_hook(sn->endpoint, sn->key, key_file_)(*s); !st)
      return problem = st.error().message(), nullptr;
    try {
      s->connect(sn->endpoint);
    } catch (const zmq::error_t& e) {
      return problem = std::string("cannot connect to ") + sn->endpoint + ": " + e.what(), nullptr;
    }
    return (sockets_[node] = std::move(s)).get();
  }

  zmq::context_t& ctx_;
  const wire::PlanUpdate& p_;
  ModelShape shape_;
  std::string key_file_;
  std::optional<ckpt::SliceMacKey> mac_key_;
  int timeout_ms_;
  const std::function<bool()>& stopped_;
  uint64_t request_ = 0;
  std::map<uint32_t, std::unique_ptr<zmq::socket_t>> sockets_;
};

// The unit's copies from one holder, if they make it whole: weights in every slot before its full
// one, good checksums. Empty string when they do.
std::string check_unit(const UnitId& id, const Answer& a) {
  auto it = a.copies.find(id);
  if (it == a.copies.end()) return "it does not hold " + id.name();
  uint32_t full = 0;
  bool found = false;
  for (const auto& [index, copy] : it->second) {
    if (ckpt::unit_checksum(copy) != copy.checksum)
      return "its copy of " + id.name() + " in the slot of iteration " + std::to_string(a.slots.at(index).first) +
             " fails its checksum";
    if (copy.full) full = index, found = true;
  }
  if (!found) return "it holds no full copy of " + id.name();
  for (uint32_t i = 0; i <= full; ++i)
    if (!it->second.count(i)) return "its copies of " + id.name() + " miss slot " + std::to_string(i);
  return "";
}

}  // namespace

Result<FetchedWindow> fetch_window(zmq::context_t& ctx, const wire::PlanUpdate& p, const std::set<UnitId>& wanted,
                                   const ModelShape& shape, const SliceAccess& access, int timeout_ms,
                                   std::vector<std::string>& notes, const std::function<bool()>& stopped) {
  if (p.restore_window < 0) return fail("the plan names no window to restore from");
  // each unit's holders, in the plan's order, and the next one to ask
  std::map<UnitId, std::vector<uint32_t>> holders;
  for (const auto& h : p.restore_holders)
    for (const auto& u : h.units) holders[UnitId{UnitKind(u.kind), u.layer, u.expert}].push_back(h.node);
  std::map<UnitId, size_t> next;
  std::map<UnitId, std::vector<std::string>> tried;
  std::set<UnitId> open(wanted.begin(), wanted.end());
  FetchedWindow out;
  auto mac_key = ckpt::parse_slice_mac_key(access.mac_key);
  Fetcher fetcher(ctx, p, shape, access.key_file, mac_key ? std::optional(*mac_key) : std::nullopt, timeout_ms, stopped);
  const std::string window = "the window from iteration " + std::to_string(p.restore_window);
  while (!open.empty()) {
    std::map<uint32_t, std::vector<UnitId>> ask;  // node -> units asked of it this round
    for (const UnitId& id : open) {
      const auto& hs = holders[id];
      size_t& n = next[id];
      if (n >= hs.size()) {
        std::string why = tried[id].empty() ? "no node holds it" : "tried: " + join(tried[id], "; ");
        return fail(id.name(), ": no good copy in ", window, " (", why, ")");
      }
      ask[hs[n]].push_back(id);
    }
    for (const auto& [node, units] : ask) {
      Answer a = fetcher.ask(node, units);
      if (fetcher.stopped()) return fail(window, ": the fetch was stopped (the plan was abandoned)");
      if (out.slots.size() < a.window) out.slots.resize(a.window);
      for (const auto& [index, meta] : a.slots)
        if (index < out.slots.size())
          out.slots[index].index = index, out.slots[index].step = meta.first, out.slots[index].grad_norm = meta.second;
      for (const UnitId& id : units) {
        std::string bad = a.problem.empty() || a.copies.count(id) ? check_unit(id, a) : a.problem;
        if (!bad.empty()) {
          std::string what = "node " + std::to_string(node) + ": " + bad;
          tried[id].push_back(what);
          ++next[id];
          if (next[id] < holders[id].size())
            notes.push_back(id.name() + " from " + window + ": " + what + "; asking node " +
                                std::to_string(holders[id][next[id]]));
          continue;
        }
        for (auto& [index, copy] : a.copies.at(id)) {
          if (index >= out.slots.size()) continue;
          out.bytes += copy.bytes();
          out.slots[index].units[id] = std::move(copy);
        }
        open.erase(id);
      }
    }
  }
  if (out.slots.empty()) return fail(window, ": no holder sent a slot");
  for (size_t i = 0; i < out.slots.size(); ++i)
    if (out.slots[i].step != uint64_t(p.restore_window) + i)
      return fail(window, ": slot ", i, " came for iteration ", out.slots[i].step, " (or not at all)");
  return out;
}

}  // namespace sal::runtime

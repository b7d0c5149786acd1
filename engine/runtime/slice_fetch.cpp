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
    wire::SliceFetch f{0, uint64_t(p_.restore_window), {}};
    for (const auto& id : units) f.units.push_back(wire::unit_ref(id));
    uint32_t sent = 0;
    a.problem = request(node, f, [&a](ckpt::DecodedSlot& d) {
      a.window = std::max(a.window, d.head.index + 1);
      a.slots[d.head.index] = {d.head.step, d.head.grad_norm};
      for (auto& [id, copy] : d.slot.units) a.copies[id][d.head.index] = std::move(copy);
    }, &sent);
    a.window = std::max(a.window, sent);  // one SlicePut per slot of the window
    return a;
  }

  // Sends `f` (numbered here) to the node's slice endpoint and hands each SlicePut of the answer
  // to `each`, until its SliceDone. Returns what went wrong ("" when nothing did).
  // `sent`, if given: the messages the SliceDone says were sent.
  std::string request(uint32_t node, wire::SliceFetch f, const std::function<void(ckpt::DecodedSlot&)>& each,
                      uint32_t* sent = nullptr) {
    std::string problem;
    zmq::socket_t* s = socket(node, problem);
    if (!s) return problem;
    f.request = ++request_;
    if (!zmq::send_multipart(*s, wire::encode(f), zmq::send_flags::dontwait)) return "its endpoint took no request";
    int64_t deadline = mono_ns() + int64_t(timeout_ms_) * 1'000'000;
    for (;;) {
      int64_t left_ms = (deadline - mono_ns()) / 1'000'000;
      if (stopped()) return "stopped";
      if (left_ms <= 0) return "no answer within " + std::to_string(timeout_ms_) + " ms";
      zmq::pollitem_t item{s->handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(std::min<int64_t>(left_ms, kStopPollMs))) == 0) continue;
      wire::Parts parts;
      if (!zmq::recv_multipart(*s, std::back_inserter(parts), zmq::recv_flags::dontwait)) continue;
      if (take(parts, f.request, each, problem, sent)) return problem;
    }
  }

 private:
  // One message of the answer; true when the answer is over (`problem` says why, if it went wrong).
  bool take(wire::Parts& parts, uint64_t request, const std::function<void(ckpt::DecodedSlot&)>& each,
            std::string& problem, uint32_t* sent) {
    if (parts.size() == 2) {
      auto env = wire::open(parts);
      if (!env) return problem = env.error().message(), true;
      auto done = wire::decode<wire::SliceDone>(*env);
      if (!done) return problem = done.error().message(), true;
      if (done->request != request) return false;  // a late answer to an earlier request
      if (sent) *sent = done->slots;
      problem = done->detail;
      return true;
    }
    if (!mac_key_) return problem = "the job's slice key is not known", true;
    if (auto st = ckpt::unseal(parts, *mac_key_); !st) return problem = st.error().message(), true;
    auto d = ckpt::decode_slot(parts, shape_);
    if (!d) return problem = d.error().message(), true;
    if (d->head.request != request) return false;
    each(*d);
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

// One agent's answer to a fetch of logs, into `out` (`have[step][rank]`: that rank's iteration came).
void take_logs(ckpt::DecodedSlot& d, const wire::PlanUpdate& p, uint32_t node, FetchedLogs& out,
               std::map<uint64_t, std::vector<bool>>& have, std::vector<std::string>& notes) {
  if (d.head.plan != p.rebuild_plan) return;  // the iteration ran again under another plan
  const size_t ranks = p.rebuild_ranks.size();
  size_t rank = ranks;
  for (size_t r = 0; r < ranks; ++r)
    if (p.rebuild_ranks[r].node == d.head.writer_node && p.rebuild_ranks[r].index == d.head.writer_index) rank = r;
  auto& got = have[d.head.step];
  got.resize(ranks, false);
  if (rank == ranks || got[rank]) return;
  if (auto bad = ckpt::damaged_logs(d); !bad.empty()) {
    notes.push_back("the log of rank " + std::to_string(rank) + " for iteration " + std::to_string(d.head.step) +
                    " held by node " + std::to_string(node) + " fails its checksum (" + bad.front() + ")");
    return;
  }
  auto& it = out.steps[d.head.step];
  it.by_rank.resize(ranks);
  out.bytes += d.log.bytes();
  it.by_rank[rank] = std::move(d.log);
  got[rank] = true;
}

// The first rank and iteration of from..to not in `have`, as words (empty: none).
std::string first_missing(const std::map<uint64_t, std::vector<bool>>& have, uint64_t from, uint64_t to, size_t ranks) {
  for (uint64_t s = from; s <= to; ++s) {
    auto it = have.find(s);
    for (size_t r = 0; r < ranks; ++r)
      if (it == have.end() || r >= it->second.size() || !it->second[r])
        return "rank " + std::to_string(r) + "'s log of iteration " + std::to_string(s);
  }
  return "";
}

}  // namespace

Result<FetchedLogs> fetch_logs(zmq::context_t& ctx, const wire::PlanUpdate& p, const std::set<UnitId>& experts,
                               uint64_t from, uint64_t to, const ModelShape& shape, const SliceAccess& access,
                               int timeout_ms, std::vector<std::string>& notes, const std::function<bool()>& stopped) {
  FetchedLogs out;
  if (from > to) return out;
  auto mac_key = ckpt::parse_slice_mac_key(access.mac_key);
  Fetcher fetcher(ctx, p, shape, access.key_file, mac_key ? std::optional(*mac_key) : std::nullopt, timeout_ms, stopped);
  wire::SliceFetch f;
  for (const auto& id : experts) f.log_units.push_back(wire::unit_ref(id));
  f.logs_from = from, f.logs_to = to;
  std::map<uint64_t, std::vector<bool>> have;
  std::vector<std::string> problems;
  for (const auto& n : p.slice_nodes) {
    if (first_missing(have, from, to, p.rebuild_ranks.size()).empty()) break;
    std::string problem = fetcher.request(n.node, f, [&](ckpt::DecodedSlot& d) { take_logs(d, p, n.node, out, have, notes); });
    if (fetcher.stopped()) return fail("the logs of iterations ", from, "..", to, ": the fetch was stopped (the plan was abandoned)");
    if (!problem.empty()) problems.push_back("node " + std::to_string(n.node) + ": " + problem);
  }
  if (auto missing = first_missing(have, from, to, p.rebuild_ranks.size()); !missing.empty())
    return fail(missing, " under plan ", p.rebuild_plan, " is held soundly by no live agent",
                problems.empty() ? "" : " (" + join(problems, "; ") + ")");
  return out;
}

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

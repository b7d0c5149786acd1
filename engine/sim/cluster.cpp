// cluster.cpp — see cluster.h.
#include "sim/cluster.h"

#include <cmath>
#include <map>

#include "sim/failures.h"
#include "sim/trace.h"

namespace sal::sim {
namespace {

uint64_t mix(uint64_t a, uint64_t b) { return a * 0x9E3779B97F4A7C15ull ^ (b + 0x7F4A7C15ull + (a << 6) + (a >> 2)); }

// A trace's events as node changes; node ids in order of first appearance.
Result<std::vector<std::pair<double, NodeChange>>> trace_changes(const Scenario& s) {
  auto path = s.resolve(s.failures.trace_path);
  auto events = read_trace(path, TraceFormat{});
  if (!events) return fail("failures.trace: ", events.error().message());
  std::map<std::string, uint32_t> ids;
  std::vector<std::pair<double, NodeChange>> out;
  for (const auto& e : *events) {
    auto it = ids.emplace(e.node, uint32_t(ids.size())).first;
    if (it->second >= s.cluster.nodes)
      return fail("failures.trace: ", path, ":", e.line, ": node '", e.node, "' is trace node ", it->second + 1,
                  " but cluster.nodes is ", s.cluster.nodes, " (set cluster.nodes to the trace's node count)");
    out.push_back({double(e.ms) / 1000.0 * s.failures.time_scale, {it->second, e.add}});
  }
  return out;
}

}  // namespace

Result<Cluster> Cluster::make(const Scenario& s, int trial) {
  Cluster c;
  c.s_ = &s;
  uint32_t n = s.cluster.nodes;
  c.up_.assign(n, false);
  c.life_.assign(n, 0);
  uint64_t base = mix(s.seed, uint64_t(trial) + 1);
  c.node_rng_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) c.node_rng_.emplace_back(mix(base, i + 1));
  c.pick_rng_ = algo::Rng(mix(base, 0));
  if (s.failures.source == FailureSpec::Source::trace) {
    auto t = trace_changes(s);
    if (!t) return t.error();
    c.trace_ = std::move(*t);
  }
  return c;
}

void Cluster::set(uint32_t node, bool up, std::vector<NodeChange>& out) {
  if (up_[node] == up) return;
  up_[node] = up;
  live_ += up ? 1 : -1;
  ++life_[node];
  out.push_back({node, up});
}

void Cluster::schedule_failure(uint32_t node, double now, EventQueue& q) {
  if (s_->failures.source != FailureSpec::Source::law) return;
  q.schedule(now + time_to_failure(s_->failures.law, node_rng_[node]), kNodeDown, node, int64_t(life_[node]));
}

void Cluster::schedule_repair(uint32_t node, double now, EventQueue& q) {
  double r = s_->failures.repair_s;
  if (r < 0 || s_->failures.source != FailureSpec::Source::law) return;
  if (s_->failures.repair_random) r *= -std::log(uniform01(node_rng_[node]));
  q.schedule(now + r, kNodeUp, node, int64_t(life_[node]));
}

void Cluster::start(EventQueue& q) {
  std::vector<NodeChange> ignored;
  bool trace = s_->failures.source == FailureSpec::Source::trace;
  for (uint32_t i = 0; i < size(); ++i) {
    if (!trace) set(i, true, ignored);
    schedule_failure(i, 0, q);
  }
  for (size_t i = 0; i < trace_.size(); ++i) {
    if (trace_[i].first <= 0) set(trace_[i].second.node, trace_[i].second.up, ignored);
    else q.schedule(trace_[i].first, trace_[i].second.up ? kNodeUp : kNodeDown, trace_[i].second.node, -1);
  }
  for (size_t i = 0; i < s_->failures.faults.size(); ++i) q.schedule(s_->failures.faults[i].at_s, kFaultFires, int64_t(i));
}

std::vector<NodeChange> Cluster::handle(const Event& e, EventQueue& q) {
  std::vector<NodeChange> out;
  if (e.kind == kFaultFires) {
    const Fault& f = s_->failures.faults[size_t(e.a)];
    for (uint32_t k = 0; k < f.count; ++k) {
      int64_t node = f.node;
      if (node < 0) {  // a random live node
        if (live_ == 0) break;
        uint64_t pick = pick_rng_.below(live_);
        for (uint32_t i = 0; i < size(); ++i)
          if (up_[i] && pick-- == 0) node = i;
      }
      if (!up_[size_t(node)]) continue;
      set(uint32_t(node), false, out);
      if (f.back_after_s >= 0) q.schedule(e.time + f.back_after_s, kNodeUp, node, int64_t(life_[size_t(node)]));
    }
    return out;
  }
  auto node = uint32_t(e.a);
  if (e.b >= 0 && uint64_t(e.b) != life_[node]) return out;  // stale: the node changed since
  set(node, e.kind == kNodeUp, out);
  if (out.empty()) return out;
  if (e.kind == kNodeDown) schedule_repair(node, e.time, q);
  else schedule_failure(node, e.time, q);
  return out;
}

std::vector<NodeChange> Cluster::replace_failed(double now, EventQueue& q) {
  std::vector<NodeChange> out;
  for (uint32_t i = 0; i < size(); ++i)
    if (!up_[i]) {
      set(i, true, out);
      schedule_failure(i, now, q);
    }
  return out;
}

}  // namespace sal::sim

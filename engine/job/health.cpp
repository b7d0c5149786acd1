// health.cpp — see health.h.
#include "job/health.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace sal::job {
namespace {

// The verdict's quantile: slow when the window's lowest fifth is at slow_ratio or more (at most
// one step in ten below it).
constexpr double kMost = 0.2;
// Plainly slow: nearly every step of the window's newer half (its lowest fifth) at this many times
// slow_ratio (2.5x with the default 1.5) names a worker in half the window — a node at a third of
// its speed need not wait for 16 steps of proof. A fault-free shared machine's starved worker was
// seen at medians of 1.7-1.96x, and at 2x the rule named 3 such workers in the suite's 127 runs
// (docs/health.md); a node cut to 40 % is at 3-5.7x. Single stalls come and go.
constexpr double kPlainly = 5.0 / 3.0;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool cpu_measured(const WorkerTimes& t) { return t.busy_cpu_ms > 0 && t.process_cpu_ms > 0 && t.busy_ms > 0 && t.tokens > 0; }

// The median of some workers' values with any one of them left out: one sort, then each answer in
// O(1) (a commit asks it for every worker: n medians of n - 1 values, not n sorts).
class MedianOfOthers {
 public:
  void add(const Participant& p, double v) { items_.emplace_back(v, p); }
  void sort() {
    std::sort(items_.begin(), items_.end());
    for (size_t i = 0; i < items_.size(); ++i) place_[items_[i].second] = i;
  }
  // How many values are left without `p`'s (0: none).
  size_t count_without(const Participant& p) const { return items_.size() - place_.count(p); }
  double without(const Participant& p) const {
    const auto it = place_.find(p);
    const size_t skip = it == place_.end() ? items_.size() : it->second, n = count_without(p);
    auto at = [&](size_t j) { return items_[j >= skip ? j + 1 : j].first; };
    if (n == 0) return 0;
    return n % 2 ? at(n / 2) : (at(n / 2 - 1) + at(n / 2)) / 2;
  }

 private:
  std::vector<std::pair<double, Participant>> items_;
  std::map<Participant, size_t> place_;
};

// The others' figures a worker's slowness is weighed against, for every worker at once: wall
// time, and of the workers whose CPU was measured, dense CPU per token, expert CPU per row and CPU
// per wall millisecond.
struct OthersMedians {
  MedianOfOthers busy, dense, expert, rate;
  const CpuPools& pools;
  std::map<std::string, double> rate_outside;  // per pool: the median CPU per wall ms outside it (absent: none)

  OthersMedians(const std::map<Participant, WorkerTimes>& times, const CpuPools& p) : pools(p) {
    for (const auto& [who, u] : times) {
      busy.add(who, u.busy_ms);
      if (!cpu_measured(u)) continue;
      dense.add(who, std::max(0.0, u.busy_cpu_ms - u.expert_cpu_ms) / double(u.tokens));
      if (u.expert_rows > 0) expert.add(who, u.expert_cpu_ms / double(u.expert_rows));
      rate.add(who, u.process_cpu_ms / u.busy_ms);
    }
    for (MedianOfOthers* m : {&busy, &dense, &expert, &rate}) m->sort();
    for (const auto& [who, pool] : pools) {
      if (pool.empty() || rate_outside.count(pool)) continue;
      std::vector<double> outside;
      for (const auto& [other, u] : times)
        if (cpu_measured(u) && pool_of(other) != pool) outside.push_back(u.process_cpu_ms / u.busy_ms);
      if (!outside.empty()) rate_outside[pool] = median(outside);
    }
  }
  std::string pool_of(const Participant& p) const {
    auto it = pools.find(p);
    return it == pools.end() ? std::string() : it->second;
  }
  // The CPU per wall millisecond `who`'s share of its CPUs is weighed against: the others' — only
  // those outside its pool where it has one (none there: 0, not weighed).
  double others_rate(const Participant& who) const {
    const std::string pool = pool_of(who);
    if (pool.empty()) return rate.without(who);
    auto it = rate_outside.find(pool);
    return it == rate_outside.end() ? 0.0 : it->second;
  }
};

// How much slower `who` is than the others (1: as fast): its work's CPU time over what the others'
// speed gives for it, times the others' CPU per wall millisecond over its own (0: not known).
double slowness(const Participant& who, const WorkerTimes& t, const OthersMedians& m) {
  if (!cpu_measured(t) || m.dense.count_without(who) == 0) {  // wall time alone
    const double others = m.busy.without(who);
    return others > 0 ? t.busy_ms / others : 0;
  }
  const double expected = m.dense.without(who) * double(t.tokens) + m.expert.without(who) * double(t.expert_rows);
  const double own_rate = t.process_cpu_ms / t.busy_ms;
  if (expected <= 0 || own_rate <= 0) return 0;
  const double others_rate = m.others_rate(who);
  const bool pooled = !m.pool_of(who).empty();
  if (!pooled && others_rate <= 0) return 0;
  // pool-mates share CPUs the host's scheduler hands out: only the work's CPU time counts among them
  return t.busy_cpu_ms / expected * (others_rate > 0 ? others_rate / own_rate : 1.0);
}

// Each worker's computing time over the median of the others' in one step (none when fewer than two
// workers, or the others computed nothing).
std::map<Participant, double> step_lags(const std::map<Participant, WorkerTimes>& times, const OthersMedians& m) {
  std::map<Participant, double> out;
  if (times.size() < 2) return out;
  for (const auto& [who, t] : times)
    if (double others = m.busy.without(who); others > 0) out[who] = t.busy_ms / others;
  return out;
}

// Each worker's slowness against the others' in one step (none when fewer than two workers
// computed anything).
std::map<Participant, double> step_ratios(const std::map<Participant, WorkerTimes>& times, const OthersMedians& m) {
  std::map<Participant, double> out;
  if (times.size() < 2) return out;
  for (const auto& [who, t] : times)
    if (double r = slowness(who, t, m); r > 0) out[who] = r;
  return out;
}

// The q-quantile of v (0: the least, 1: the most), the nearest rank.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

template <class T>
void push_bounded(std::deque<T>& d, T v, size_t n) {
  d.push_back(std::move(v));
  while (d.size() > n) d.pop_front();
}

}  // namespace

std::vector<SpeedChange> SpeedWatch::observe(uint64_t step, const std::map<Participant, WorkerTimes>& times,
                                             const CpuPools& pools) {
  std::vector<SpeedChange> changes;
  const OthersMedians others(times, pools);
  for (const auto& [who, lag] : step_lags(times, others)) push_bounded(workers_[who].lags, lag, o_.window);
  for (const auto& [who, r] : step_ratios(times, others)) {
    Track& t = workers_[who];
    push_bounded(t.ratios, r, o_.window);
    push_bounded(t.times, times.at(who), o_.window);
    if (t.ratios.size() < o_.window) continue;
    const std::vector<double> window(t.ratios.begin(), t.ratios.end());
    // slow when nearly every step of the window was (stalls come and go), or when its newer half is
    // plainly slow; back when most are not
    const std::vector<double> newer(window.end() - long(window.size() / 2), window.end());
    const bool now_slow = t.slow ? median(window) > o_.back_ratio
                                 : quantile(window, kMost) >= o_.slow_ratio ||
                                       quantile(newer, kMost) >= kPlainly * o_.slow_ratio;
    if (now_slow == t.slow) continue;
    t.slow = now_slow;
    t.since_step = step;
    changes.push_back({who, now_slow, median(window), step});
  }
  return changes;
}

WorkerHealth SpeedWatch::health_of(const Participant& who, const Track& t) const {
  WorkerHealth h;
  h.who = who;
  h.steps = t.ratios.size();
  h.ratio = t.ratios.empty() ? 1 : median(std::vector<double>(t.ratios.begin(), t.ratios.end()));
  h.lag = t.lags.empty() ? 1 : median(std::vector<double>(t.lags.begin(), t.lags.end()));
  h.slow = t.slow;
  h.since_step = t.since_step;
  auto phase = [&](double WorkerTimes::*field) {
    std::vector<double> v;
    for (const auto& x : t.times) v.push_back(x.*field);
    return median(std::move(v));
  };
  h.median = {phase(&WorkerTimes::busy_ms), phase(&WorkerTimes::exchange_ms), phase(&WorkerTimes::sync_ms),
              phase(&WorkerTimes::update_ms)};
  return h;
}

void SpeedWatch::restart_lag(const Participant& who) {
  if (auto it = workers_.find(who); it != workers_.end()) it->second.lags.clear();
}

void SpeedWatch::keep_only(const std::vector<Participant>& workers) {
  std::erase_if(workers_, [&](const auto& w) { return std::find(workers.begin(), workers.end(), w.first) == workers.end(); });
}

std::vector<WorkerHealth> SpeedWatch::report() const {
  std::vector<WorkerHealth> out;
  for (const auto& [who, t] : workers_) out.push_back(health_of(who, t));
  return out;
}

size_t SpeedWatch::slow_count() const {
  return size_t(std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return w.second.slow; }));
}

std::string describe(const SpeedChange& c, size_t window) {
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2f", c.ratio);
  const std::string over = " (the median of its last " + std::to_string(window) + " steps, at step " +
                           std::to_string(c.step) + ")";
  if (c.slow) return "worker " + participant_name(c.who) + " computes " + ratio + "x the others' time" + over;
  return "worker " + participant_name(c.who) + " is back to " + ratio + "x the others' time" + over;
}

}  // namespace sal::job

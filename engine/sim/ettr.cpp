// ettr.cpp — see ettr.h.
#include "sim/ettr.h"

#include <cmath>

#include "sim/event_queue.h"

namespace sal::sim {
namespace {

enum Kind { kSegmentDone = 0, kFailure = 1 };

struct Trial {
  double wall = 0, useful = 0;
  uint64_t failures = 0, events = 0;
};

// One run on one event queue: a segment's completion races the next failure; a failure makes the
// pending completion stale (its generation is old) and schedules the segment again after the
// restart.
Trial run_trial(const EttrModel& m, int64_t segments, algo::Rng& rng) {
  Trial t;
  double segment = double(m.interval) * m.iter_s + m.ckpt_s, now = 0;
  int64_t generation = 0, done = 0;
  EventQueue q;
  q.schedule(segment, kSegmentDone, generation);
  q.schedule(time_to_failure(m.failures, rng), kFailure);
  while (done < segments) {
    Event e = q.pop();
    if (e.kind == kSegmentDone) {
      if (e.a != generation) continue;  // overtaken by a failure
      now = e.time;
      t.useful += double(m.interval) * m.iter_s;
      ++done;
      q.schedule(now + segment, kSegmentDone, generation);
    } else {
      ++t.failures;
      now = e.time + m.restart_s;
      ++generation;
      q.schedule(now + segment, kSegmentDone, generation);
      q.schedule(now + time_to_failure(m.failures, rng), kFailure);  // renewed after the restart
    }
  }
  t.wall = now;
  t.events = q.popped();
  return t;
}

}  // namespace

Status check(const EttrModel& m) {
  if (!(m.iter_s > 0)) return fail("iteration time must be > 0, got ", m.iter_s);
  if (m.interval < 1) return fail("checkpoint interval must be >= 1 iteration, got ", m.interval);
  if (!(m.ckpt_s >= 0)) return fail("checkpoint time must be >= 0, got ", m.ckpt_s);
  if (!(m.restart_s >= 0)) return fail("restart time must be >= 0, got ", m.restart_s);
  if (!(m.failures.mean_s > 0)) return fail("MTBF must be > 0, got ", m.failures.mean_s);
  return {};
}

Result<double> ettr_closed_form(const EttrModel& m) {
  SAL_TRY(check(m));
  if (m.failures.kind != FailureLaw::Kind::exponential)
    return fail("the closed form holds for exponential failures only (", m.failures.describe(), "): simulate instead");
  double M = m.failures.mean_s, T = double(m.interval) * m.iter_s + m.ckpt_s;
  double expected = (M + m.restart_s) * std::expm1(T / M);
  return double(m.interval) * m.iter_s / expected;
}

Result<EttrSimResult> simulate_ettr(const EttrModel& m, int64_t segments, int trials, uint64_t seed) {
  SAL_TRY(check(m));
  if (segments < 1 || trials < 1) return fail("need at least one segment and one trial");
  algo::Rng rng(seed);
  double sum = 0, sum_sq = 0, failures = 0, wall = 0;
  EttrSimResult r;
  for (int i = 0; i < trials; ++i) {
    Trial t = run_trial(m, segments, rng);
    double e = t.useful / t.wall;
    sum += e;
    sum_sq += e * e;
    failures += double(t.failures);
    wall += t.wall;
    r.events += t.events;
  }
  r.ettr = sum / trials;
  double var = trials > 1 ? (sum_sq - sum * sum / trials) / (trials - 1) : 0;
  r.stderr_ettr = std::sqrt(std::max(var, 0.0) / trials);
  r.failures_per_hour = failures / wall * 3600;
  return r;
}

}  // namespace sal::sim

// ettr.h — the effective training time ratio (useful compute time over wall time) of a job that
// checkpoints, under failures: the model `salamander sim ettr` computes in closed form and
// simulates on the event core, and the baseline the MoEtion and Gemini-style strategies improve on.
//
// The model. Work runs in segments: `interval` iterations of `iter_s` seconds, then a blocking
// checkpoint of `ckpt_s` (segment T = interval × iter_s + ckpt_s). Failures arrive by a failure law
// (failures.h) with mean `mtbf_s` for the whole job, renewed after each restart; a failure loses
// the segment in progress and costs `restart_s` (failure-free) before it is run again. For
// exponential failures the expected wall time of a segment is (M + R)(e^{T/M} − 1), so
//   ETTR = interval × iter_s / ((M + R)(e^{T/M} − 1)).
// The simulation draws the same process, so for exponential failures it must agree with this
// within its sampling error; for Weibull failures only the simulation applies.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "sim/failures.h"

namespace sal::sim {

struct EttrModel {
  double iter_s = 1;       // one training iteration
  int64_t interval = 100;  // iterations between checkpoints
  double ckpt_s = 10;      // a checkpoint's blocking time
  double restart_s = 60;   // from a failure to training again (detection, restart, reload)
  FailureLaw failures;     // the job's time between failures
};

Status check(const EttrModel& m);
// The closed form (exponential failures only).
Result<double> ettr_closed_form(const EttrModel& m);

struct EttrSimResult {
  double ettr = 0, stderr_ettr = 0;
  double failures_per_hour = 0;
  uint64_t events = 0;
};
// `trials` independent runs of `segments` segments each. Deterministic for a seed.
Result<EttrSimResult> simulate_ettr(const EttrModel& m, int64_t segments, int trials, uint64_t seed);

}  // namespace sal::sim

// resume_job.h — the job `salamander run --resume PATH` trains. A run directory records the job it
// ran (its journal.jsonl: the job's text, the --set overrides in it, and its directory), and PATH is
// one (or its checkpoint/, or one of its snapshots/step-S). Without a job file or --set the resumed
// run trains that job. With them it trains the job they make, but only when it is the same — every
// key that differs is named (key: saved vs now) and the run refused — unless the user confirms
// with --resume-anyway. Both jobs take the command line's --steps, which may lengthen the run.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"
#include "job/config.h"

namespace sal::cli {

struct ResumeRequest {
  std::string path;                    // --resume PATH
  std::optional<std::string> job_file; // JOB.lua, if given
  job::Overrides sets;                 // --set
  job::Overrides steps;                // steps_override(): the job's length, applied to both jobs
  bool anyway = false;                 // --resume-anyway
};

struct ResumedJob {
  job::JobConfig job;
  std::string run_dir;  // where the saved job came from; empty when PATH has no journal beside it
};

Result<ResumedJob> job_to_resume(const ResumeRequest& r);

}  // namespace sal::cli

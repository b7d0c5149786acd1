// resume_job.cpp — see resume_job.h.
#include "cli/resume_job.h"

#include <filesystem>

#include "cli/common.h"
#include "core/paths.h"
#include "mesh/journal_file.h"

namespace sal::cli {
namespace {

namespace fs = std::filesystem;

// The run directory PATH belongs to (the run directory itself, its checkpoint/, or one of its
// snapshots/step-S), when it has a journal.
std::optional<std::string> run_dir_of(const std::string& path) {
  fs::path p = fs::path(absolute_path(path)).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::vector<fs::path> candidates{p};
  if (p.filename() == "checkpoint") candidates.push_back(p.parent_path());
  if (p.parent_path().filename() == "snapshots") candidates.push_back(p.parent_path().parent_path());
  for (const auto& dir : candidates)
    if (path_exists((dir / "journal.jsonl").string())) return dir.string();
  return std::nullopt;
}

// The job the run directory's journal recorded, with `sets` applied.
Result<job::JobConfig> saved_job(const std::string& run_dir, const job::Overrides& sets) {
  auto state = mesh::read_journal_file(run_dir);
  if (!state) return state.error();
  if (!state->job) return fail(run_dir, "/journal.jsonl: no job recorded");
  auto text = job::apply_overrides(state->job->text, sets);
  if (!text) return text.error();
  auto job = job::load_text(*text, state->job->file, state->job->dir);
  if (!job) return job.error().with_context(run_dir + "/journal.jsonl: the job");
  job->name = state->job->name;
  return job;
}

// Every difference, a line each, and what to do about them.
std::string refusal(const std::string& run_dir, const std::vector<job::KeyChange>& changes) {
  std::string out = "the job differs from the one " + run_dir + " trained (its journal.jsonl):";
  for (const auto& c : changes) out += "\n  " + c.key + ": saved " + c.before + ", now " + c.after;
  return out + "\ngive --resume-anyway to go on from its checkpoint with the new job, or leave out the job file and "
               "--set to resume the job it trained";
}

}  // namespace

Result<ResumedJob> job_to_resume(const ResumeRequest& r) {
  job::Overrides all = r.sets;
  all.insert(all.end(), r.steps.begin(), r.steps.end());
  const bool given = r.job_file || !r.sets.empty();
  auto dir = run_dir_of(r.path);
  if (!dir) {
    if (!given)
      return fail("--resume ", r.path, ": no journal.jsonl of its run beside it says which job it trained: give the job "
                  "file (salamander run JOB.lua --resume ", r.path, ")");
    auto job = load_job(r.job_file, all);
    if (!job) return job.error();
    return ResumedJob{std::move(*job), ""};
  }
  auto saved = saved_job(*dir, r.steps);
  if (!saved) return saved.error().with_context("--resume " + r.path);
  if (!given) return ResumedJob{std::move(*saved), *dir};
  auto now = r.job_file ? job::load_file(*r.job_file, all) : saved_job(*dir, all);
  if (!now) return now.error();
  auto changes = job::differences(*saved, *now);
  if (!changes.empty() && !r.anyway) return fail("--resume ", r.path, ": ", refusal(*dir, changes));
  return ResumedJob{std::move(*now), *dir};
}

}  // namespace sal::cli

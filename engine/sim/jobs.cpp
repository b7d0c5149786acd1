// jobs.cpp — see jobs.h.
#include "sim/jobs.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "core/lifetime.h"

namespace sal::sim {
namespace {

// The simulation threads' nice value: the controller's loop (heartbeats, steps) comes first.
constexpr int kSimNice = 10;

std::string count_text(uint64_t n) {
  if (n < 1000) return std::to_string(n);
  if (n < 1000000) return fmt::format("{:.1f} k", double(n) / 1e3);
  if (n < 1000000000) return fmt::format("{:.1f} M", double(n) / 1e6);
  return fmt::format("{:.1f} G", double(n) / 1e9);
}

std::string seconds_text(double s) { return s < 100 ? fmt::format("{:.1f} s", s) : fmt::format("{:.0f} s", s); }

// Trial runs of the whole job (points x strategies x trials), so that status shows the total from
// the start. sim::scenario_file_from_json has already read every point; an error here is unexpected
// but is still carried up.
Result<size_t> count_trial_runs(const SimJobSpec& spec) {
  size_t total = 0;
  for (const auto& point : sim::sweep_points(spec.file)) {
    nlohmann::json j = spec.file.spec;
    for (const auto& [param, value] : point)
      if (auto s = sim::set_param(j, param, value); !s) return s.error().with_context("sweep");
    auto sc = sim::read_scenario(j, spec.file.source, spec.file.dir);
    if (!sc) return sc.error();
    total += sc->strategies.size() * size_t(spec.trials > 0 ? spec.trials : sc->trials);
  }
  return total;
}

std::string scenario_name(const sim::ScenarioFile& f) {
  auto it = f.spec.find("name");
  return it != f.spec.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

const char* sim_job_state_name(SimJobState s) {
  switch (s) {
    case SimJobState::running: return "running";
    case SimJobState::done: return "done";
    case SimJobState::failed: return "failed";
    case SimJobState::cancelled: return "cancelled";
  }
  return "?";
}

std::string SimJobView::line() const {
  std::string head = "sim " + std::to_string(id) + ": ";
  std::string runs = std::to_string(done) + "/" + std::to_string(total) + " trial runs";
  std::string tail = count_text(events) + " events, " + seconds_text(elapsed_s);
  switch (state) {
    case SimJobState::running: {
      std::string eta = eta_s < 0 ? "ETA ?" : fmt::format("ETA {:.0f} s", eta_s);
      return head + runs + ", " + tail + ", " + (cancel_requested ? "cancelling" : eta);
    }
    case SimJobState::done: return head + "done, " + runs + ", " + tail;
    case SimJobState::cancelled: return head + "cancelled at " + runs + ", " + tail;
    case SimJobState::failed: return head + "failed at " + runs + ", " + tail + ": " + error;
  }
  return head + "?";
}

// A job: written by its simulation thread (progress, then the outcome) under `mu`, read by the loop.
struct SimJobs::Job {
  uint64_t id = 0;
  std::string name, source;
  int64_t started_ns = 0;
  std::atomic<bool> cancel{false};
  std::thread thread;

  mutable std::mutex mu;
  SimJobState state = SimJobState::running;
  sim::Progress progress;
  int64_t ended_ns = 0;
  std::string error;
  std::shared_ptr<const sim::SimResult> result;

  void run(const sim::ScenarioFile& file, sim::RunOptions o);
  void finish(Result<sim::SimResult> r);
  SimJobView view() const;
  bool finished() const {
    std::lock_guard lock(mu);
    return state != SimJobState::running;
  }
};

void SimJobs::Job::run(const sim::ScenarioFile& file, sim::RunOptions o) {
  block_signals_in_this_thread();
  lower_this_thread_priority(kSimNice);
  o.cancel = &cancel;
  o.progress = [this](const sim::Progress& p) {
    std::lock_guard lock(mu);
    size_t total = progress.total;
    progress = p;
    if (p.total == 0) progress.total = total;
  };
  Result<sim::SimResult> r = Error("the simulation returned nothing");
  try {
    r = sim::run_simulation(file, o);
  } catch (const std::exception& e) {
    r = Error(std::string("internal error in the simulator: ") + e.what());
  }
  finish(std::move(r));
}

void SimJobs::Job::finish(Result<sim::SimResult> r) {
  std::lock_guard lock(mu);
  ended_ns = mono_ns();
  if (cancel.load()) {
    state = SimJobState::cancelled;
  } else if (r.ok()) {
    state = SimJobState::done;
    progress.done = progress.total;
    progress.events = r->events;
    result = std::make_shared<const sim::SimResult>(std::move(*r));
  } else {
    state = SimJobState::failed;
    error = r.error().message();
  }
  spdlog::info("sim {}: {}{}", id, sim_job_state_name(state), error.empty() ? "" : ": " + error);
}

SimJobView SimJobs::Job::view() const {
  std::lock_guard lock(mu);
  SimJobView v;
  v.id = id;
  v.name = name;
  v.source = source;
  v.state = state;
  v.done = progress.done;
  v.total = progress.total;
  v.events = progress.events;
  v.current = progress.current;
  v.error = error;
  v.cancel_requested = cancel.load();
  v.elapsed_s = double((state == SimJobState::running ? mono_ns() : ended_ns) - started_ns) / 1e9;
  if (state == SimJobState::done) v.eta_s = 0;
  else if (state == SimJobState::running && v.done > 0)
    v.eta_s = v.elapsed_s / double(v.done) * double(v.total - std::min(v.done, v.total));
  return v;
}

SimJobs::SimJobs() = default;

SimJobs::~SimJobs() {
  std::lock_guard lock(mu_);
  for (auto& j : jobs_) j->cancel.store(true);
  for (auto& j : jobs_)
    if (j->thread.joinable()) j->thread.join();
}

Result<uint64_t> SimJobs::start(SimJobSpec spec) {
  std::lock_guard lock(mu_);
  if (running() >= kMaxRunning)
    return Error(std::to_string(kMaxRunning) + " simulations are running, which is the limit: wait for one "
                 "(sim.status()) or cancel one (sim.cancel(id))");
  auto total = count_trial_runs(spec);
  if (!total) return total.error();
  drop_old_finished();
  auto job = std::make_unique<Job>();
  Job* j = job.get();
  j->id = next_id_;
  j->name = scenario_name(spec.file);
  j->source = spec.file.source;
  j->started_ns = mono_ns();
  j->progress.total = *total;
  sim::RunOptions o;
  o.trials = spec.trials;
  o.seed = spec.seed;
  try {
    j->thread = std::thread([j, file = std::move(spec.file), o]() { j->run(file, o); });
  } catch (const std::system_error& e) {
    return Error(std::string("cannot start a simulation thread: ") + e.what());
  }
  jobs_.push_back(std::move(job));
  spdlog::info("sim {}: started {} ({} trial runs)", j->id, j->source, *total);
  return next_id_++;
}

SimJobs::Job* SimJobs::find(uint64_t id) const {
  for (const auto& j : jobs_)
    if (j->id == id) return j.get();
  return nullptr;
}

Error SimJobs::unknown(uint64_t id) const {
  if (jobs_.empty()) return Error("no job " + std::to_string(id) + " (no simulation was started)");
  return Error("no job " + std::to_string(id) + " (jobs kept: " + std::to_string(jobs_.front()->id) + ".." +
               std::to_string(jobs_.back()->id) + ")");
}

size_t SimJobs::running() const {
  size_t n = 0;
  for (const auto& j : jobs_) n += j->finished() ? 0 : 1;
  return n;
}

void SimJobs::drop_old_finished() {
  size_t finished = jobs_.size() - running();
  for (auto it = jobs_.begin(); it != jobs_.end() && finished >= kKeepFinished;) {
    if (!(*it)->finished()) {
      ++it;
      continue;
    }
    if ((*it)->thread.joinable()) (*it)->thread.join();  // already past its last write: returns at once
    it = jobs_.erase(it);
    --finished;
  }
}

Result<SimJobView> SimJobs::view(uint64_t id) const {
  std::lock_guard lock(mu_);
  if (const Job* j = find(id)) return j->view();
  return unknown(id);
}

std::optional<SimJobView> SimJobs::latest() const {
  std::lock_guard lock(mu_);
  if (jobs_.empty()) return std::nullopt;
  return jobs_.back()->view();
}

std::vector<SimJobView> SimJobs::list() const {
  std::lock_guard lock(mu_);
  std::vector<SimJobView> out;
  for (const auto& j : jobs_) out.push_back(j->view());
  return out;
}

Result<std::shared_ptr<const sim::SimResult>> SimJobs::result(uint64_t id) const {
  std::lock_guard lock(mu_);
  const Job* j = find(id);
  if (!j) return unknown(id);
  SimJobView v = j->view();
  std::string runs = std::to_string(v.done) + "/" + std::to_string(v.total);
  switch (v.state) {
    case SimJobState::done: {
      std::lock_guard lock(j->mu);
      return j->result;
    }
    case SimJobState::running: return Error("job " + std::to_string(id) + " is still running (" + runs + ")");
    case SimJobState::cancelled: return Error("job " + std::to_string(id) + " was cancelled at " + runs);
    case SimJobState::failed: return Error("job " + std::to_string(id) + " failed: " + v.error);
  }
  return Error("job " + std::to_string(id) + ": unknown state");
}

Result<bool> SimJobs::cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  Job* j = find(id);
  if (!j) return unknown(id);
  if (j->finished()) return false;
  j->cancel.store(true);
  spdlog::info("sim {}: cancel requested", id);
  return true;
}

}  // namespace sal::sim

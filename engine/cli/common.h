// common.h — pieces every subcommand uses: logging from the common options, loading a job file
// (or the embedded default), and an event loop that shuts down cleanly with signal handling.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"
#include "core/result.h"
#include "drill/drill_spec.h"
#include "job/config.h"

namespace sal::cli {

// Applies --log-level/--log-format/--log-file. `stderr_level` quiets the terminal (e.g. "warn"
// while a progress line is shown) without changing what goes to the file; `stderr_once` has the
// terminal say each distinct message once (log::repeated_on_stderr() counts the rest).
Status setup_logging(const Parsed& p, const std::string& process, const std::string& file_override = "",
                     const std::string& stderr_level = "", bool stderr_once = false);

// A job file path, or the embedded quickstart when none is given.
Result<job::JobConfig> load_job(const std::optional<std::string>& path, const job::Overrides& sets = {});

// The --set option of a command that loads a job (run, controller, job check): its PATH=VALUE pairs.
Result<job::Overrides> job_overrides(const Parsed& p);

// The job's length as an override of a command that takes --steps (run, controller): train.steps
// set to --steps, else to the drill's steps, else none (the job's own). One value, so the
// controller's steps, the workers' learning-rate schedule and the job text the run keeps agree. A
// --set train.steps that disagrees with it is an error naming both.
Result<job::Overrides> steps_override(const Parsed& p, std::optional<int64_t> drill_steps);

// --set's line in a command's option list.
inline const char* const kSetHelp =
    "override job file keys, e.g. --set train.lr=0.001,model.d_model=128 (checked by the schema; given again, it adds "
    "to the list)";

// --checkpoint's line in the option list of a command that reads a checkpoint (sample, export):
// what ckpt::resolve_checkpoint takes.
inline const char* const kCheckpointHelp =
    "a checkpoint or complete snapshot directory, or a run directory (its final checkpoint, else its newest "
    "complete snapshot)";

// A libuv loop owned by a command. Objects holding uv handles must be destroyed before the loop;
// `close()` then runs the remaining close callbacks and closes the loop.
class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  uv_loop_t* get() { return &loop_; }
  void run();
  void stop();
  // Calls `fn(signum)` on SIGTERM, and on SIGINT unless `sigint` is false.
  void on_signals(std::function<void(int)> fn, bool sigint = true);
  void close();

 private:
  uv_loop_t loop_;
  std::unique_ptr<uv_signal_t> sigint_, sigterm_;
  std::function<void(int)> on_signal_;
  bool closed_ = false;
};

int usage_error(const Command& cmd, const std::string& message);

// "K=V,K2=V2" option values in order. A comma followed by text that does not start KEY= belongs to
// the value before it (mesh.devices=cuda:0,1 is one item); a first item without a key is an error
// naming the option.
Result<std::vector<std::pair<std::string, std::string>>> key_values(const std::string& option, const std::string& text);

// --drill DRILL.lua with --drill-arg K=V,... (run, controller): the drill loaded and checked; none
// without --drill. `service` keeps a controller serving while the script runs.
Result<std::optional<drill::DrillSpec>> drill_option(const Parsed& p, std::function<void()> service = {});

// <base>/<name>-<YYYYmmdd-HHMMSS>[-N], created (runs and simulations write their files there).
Result<std::string> make_run_dir(const std::string& base, const std::string& name);

// --metrics ADDR (run, controller): replaces the job's metrics.bind, checked as the schema checks it.
Status metrics_option(const Parsed& p, job::JobConfig& job);

// --metrics' line in a command's option list.
inline const char* const kMetricsHelp =
    "serve Prometheus metrics over HTTP at ADDR/metrics: tcp://HOST:PORT (PORT * for any free port) or a bare "
    "PORT on loopback; sets metrics.bind (default: the job's, off)";

// --cpu-share F (run, agent): CPUs per worker in (0, 64]; 0 when the option is absent.
Result<double> cpu_share_option(const Parsed& p);

}  // namespace sal::cli

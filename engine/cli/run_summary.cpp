// run_summary.cpp — see run_summary.h.
#include "cli/run_summary.h"

#include <algorithm>
#include <cstdio>

#include "core/clock.h"
#include "core/paths.h"
#include "report/report.h"

namespace sal::cli {
namespace {

double elapsed_s(const RunView& v) { return double((v.finished_ns ? v.finished_ns : mono_ns()) - v.started_ns) / 1e9; }

// Where a restore came from, in words (job::RecoveryRecord::source).
const char* restore_source_text(const std::string& source) {
  if (source == "peers") return "a window of sparse snapshots in peers' memory";
  if (source == "logs") return "the lost experts' sparse snapshots and the upstream logs (rebuilt alone)";
  if (source == "disk") return "a dense snapshot on disk";
  return "the seed";
}

bool checkpoint_written(const job::Driver& d) { return !d.checkpoint_dir().empty() && d.phase() == job::Phase::done; }

}  // namespace

std::string nodes_alive(size_t live, int64_t mesh_nodes) {
  const size_t expected = size_t(std::max<int64_t>(mesh_nodes, 0));
  return live <= expected ? std::to_string(live) + "/" + std::to_string(expected) + " alive"
                          : std::to_string(live) + " alive (mesh.nodes = " + std::to_string(expected) + ")";
}

std::string status_line(const RunView& v) {
  const auto& c = v.controller;
  const auto& m = c.membership();
  const auto& tr = c.driver();
  const auto& metrics = c.step_log();
  std::string steps = v.steps_target > 0 ? std::to_string(c.steps().committed()) + "/" + std::to_string(v.steps_target)
                                         : "idle (no steps)";
  std::string train;
  if (metrics.last()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " · loss %.3f · %.0f tok/s", metrics.mean_loss(10), metrics.recent_tokens_per_s(mesh::StepLog::kRecentSteps));
    train = buf;
  }
  std::string plan = tr.applied() ? " · plan " + std::to_string(tr.applied()->number()) : "";
  const std::string nodes = nodes_alive(m.live_nodes(), c.job().mesh.nodes);
  char buf[320];
  std::snprintf(buf, sizeof buf, "[%6.1fs] step %s%s · %zu workers · %s%s · epoch %llu · nodes %s", elapsed_s(v),
                steps.c_str(), train.c_str(), m.ready_workers(), job::phase_name(tr.phase()), plan.c_str(),
                (unsigned long long)m.epoch(), nodes.c_str());
  return buf;
}

// The upstream logs (train.expert_logs) the plan in force's ranks put with their last votes: one
// iteration's of every rank, and a window's (the checkpoint schedule's W iterations: what a rebuild
// replays at most), each held by train.log_copies of the train.peer_copies slice peers. Null without.
nlohmann::json expert_logs(const job::Driver& tr, const job::JobConfig& job) {
  if (!job.train.expert_logs || job::sparse_peer_copies(job) == 0 || !tr.applied()) return nullptr;
  uint64_t per_iteration = 0;
  for (const auto& r : tr.applied()->ranks)
    if (auto it = tr.sparse_holdings().find(r); it != tr.sparse_holdings().end()) per_iteration += it->second.log_bytes;
  const uint64_t window = tr.applied()->plan.schedule.window;
  return {{"bytes_per_iteration", per_iteration}, {"window", window}, {"bytes_per_window", per_iteration * window},
          {"copies", job::upstream_log_copies(job)}};
}

nlohmann::ordered_json run_summary(const RunView& v) {
  const auto& c = v.controller;
  const auto& m = c.membership();
  const auto& st = c.steps();
  const auto& tr = c.driver();
  const auto& metrics = c.step_log();
  const auto& job = c.job();
  nlohmann::ordered_json j;
  j["job"] = job.name;
  j["mode"] = job.train.recovery;
  j["drill"] = v.drill.empty() ? nlohmann::json() : nlohmann::json(v.drill);
  j["steps"] = st.committed();
  j["steps_target"] = v.steps_target;
  j["samples"] = st.committed() * uint64_t(job.train.batch);
  j["aborted_steps"] = c.aborted_steps();  // the run's, across a controller's restarts
  j["patched_steps"] = c.patched_steps();
  j["first_loss"] = metrics.first() ? nlohmann::json(metrics.first()->loss) : nlohmann::json();
  j["final_loss"] = metrics.last() ? nlohmann::json(metrics.last()->loss) : nlohmann::json();
  if (const auto& v0 = metrics.first_validated()) {  // train.eval_every: the validation loss, first and last
    j["first_val_loss"] = {{"step", v0->step}, {"loss", v0->val_loss}};
    j["final_val_loss"] = {{"step", metrics.last_validated()->step}, {"loss", metrics.last_validated()->val_loss}};
  }
  j["tokens_per_s"] = metrics.tokens_per_s();
  j.update(c.record().summary());
  j["expert_logs"] = expert_logs(tr, job);
  j["plan"] = tr.applied() ? tr.applied()->number() : 0;
  j["epoch"] = m.epoch();
  j["nodes_joined"] = m.nodes().size();
  j["nodes_lost"] = m.count(mesh::NodeState::dead);
  j["workers_restarted"] = m.restarted_workers();
  j["elapsed_s"] = elapsed_s(v);
  j["cpu_share"] = v.cpu_share ? nlohmann::json(*v.cpu_share) : nlohmann::json();
  j["started_mono_ns"] = c.started_ns();
  auto ex = nlohmann::json::array();
  for (const auto& e : v.expectations) ex.push_back({{"what", e.what}, {"ok", e.ok}, {"detail", e.detail}});
  j["expectations"] = ex;
  j["stopped_by"] = v.stop_reason;
  if (!tr.failure().empty()) j["failure"] = tr.failure();
  if (checkpoint_written(tr)) j["checkpoint"] = tr.checkpoint_dir();
  const std::string url = c.endpoint("metrics");
  j["metrics_url"] = url.empty() ? nlohmann::json() : nlohmann::json(url);
  j["run_dir"] = v.run_dir;
  j["exit_code"] = v.exit_code;
  return j;
}

// "time: computing 5.81 s · reconfiguring 1.31 s · restoring 0.42 s · waiting 52.49 s (for the mesh,
// or for workers enough to plan)": where the run's time went (summary.json's time_s), so a run that trained little
// because the trace left too few workers says so, whatever its recoveries' own capacity waits were.
static void print_time_line(const nlohmann::ordered_json& j) {
  if (!j.contains("time_s") || !j["time_s"].is_object() || j["time_s"].empty()) return;
  struct Phase {
    const char *key, *name, *note;
  };
  static const Phase kPhases[] = {{"compute", "computing", ""},
                                  {"reconfigure", "reconfiguring", ""},
                                  {"restore", "restoring", ""},
                                  {"save", "saving", ""},
                                  {"wait", "waiting", " (for the mesh, or for workers enough to plan)"}};
  std::string line;
  for (const auto& [key, name, note] : kPhases) {
    if (!j["time_s"].contains(key)) continue;
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %.2f s%s", line.empty() ? "" : " · ", name, j["time_s"][key].get<double>(),
                  note);
    line += part;
  }
  std::printf("time: %s\n", line.c_str());
}

void print_text_summary(const RunView& v, const nlohmann::ordered_json& j) {
  const auto& c = v.controller;
  const auto& tr = c.driver();
  const auto& metrics = c.step_log();
  const uint64_t patched = j["patched_steps"].get<uint64_t>();
  std::string patched_text = patched ? ", " + std::to_string(patched) + " patched" : "";
  const size_t restarted = j["workers_restarted"].get<size_t>();
  std::string restarted_text = restarted ? ", " + std::to_string(restarted) + " workers restarted" : "";
  std::printf("%s — %llu steps committed (%llu aborted%s) in %.2f s · epoch %llu · %zu nodes joined, %zu lost%s\n",
              v.stop_reason.c_str(), (unsigned long long)j["steps"].get<uint64_t>(),
              (unsigned long long)j["aborted_steps"].get<uint64_t>(), patched_text.c_str(), j["elapsed_s"].get<double>(),
              (unsigned long long)j["epoch"].get<uint64_t>(), j["nodes_joined"].get<size_t>(), j["nodes_lost"].get<size_t>(),
              restarted_text.c_str());
  if (metrics.first())
    std::printf("loss %.3f -> %.3f · %.0f tokens/s · %llu samples\n", metrics.first()->loss, metrics.last()->loss,
                metrics.tokens_per_s(), (unsigned long long)j["samples"].get<uint64_t>());
  print_time_line(j);
  if (const auto& v0 = metrics.first_validated())
    std::printf("validation loss %.3f (step %llu) -> %.3f (step %llu)\n", v0->val_loss, (unsigned long long)v0->step,
                metrics.last_validated()->val_loss, (unsigned long long)metrics.last_validated()->step);
  const auto& rec = c.record();
  if (!rec.recoveries().empty()) {
    const double waited = j["capacity_wait_s"].get<double>();
    char capacity[64] = "";
    if (waited > 0) std::snprintf(capacity, sizeof capacity, "; %.2f s more waiting for capacity", waited);
    const double interrupted = j["interrupted_s"].get<double>();
    char cut[96] = "";
    if (interrupted > 0) std::snprintf(cut, sizeof cut, "; %.2f s computing steps that later losses aborted", interrupted);
    std::printf("recoveries: %zu (p50 %.2f s, max %.2f s%s%s) · lost steps %llu · restores %llu\n", rec.recoveries().size(),
                j["recovery_p50_s"].get<double>(), j["recovery_max_s"].get<double>(), capacity, cut,
                (unsigned long long)rec.lost_steps(), (unsigned long long)rec.restores());
  }
  if (const auto& logs = j["expert_logs"]; logs.is_object() && logs["bytes_per_iteration"].get<uint64_t>() > 0)
    std::printf("upstream logs: %.1f KiB an iteration over every rank, %.1f KiB a window of %llu (each held %llu times)\n",
                double(logs["bytes_per_iteration"].get<uint64_t>()) / 1024, double(logs["bytes_per_window"].get<uint64_t>()) / 1024,
                (unsigned long long)logs["window"].get<uint64_t>(), (unsigned long long)logs["copies"].get<uint64_t>());
  for (const auto& r : rec.recoveries())
    if (r.kind == "patch")
      std::printf("  patched step %llu (%s): surviving groups computed the lost group's shard types, nothing aborted\n",
                  (unsigned long long)r.step, r.cause.c_str());
  for (const auto& r : rec.recoveries())
    if (!r.source.empty())
      std::printf("  restore from %s (%s): %llu committed steps run again, training went on with step %llu\n",
                  restore_source_text(r.source), r.cause.c_str(), (unsigned long long)r.rerun, (unsigned long long)r.step);
  for (const auto& e : v.expectations)
    std::printf("  %s  %s: %s\n", e.ok ? "PASS" : "FAIL", e.what.c_str(), e.detail.c_str());
  if (!tr.failure().empty()) std::printf("training failed: %s\n", tr.failure().c_str());
  if (checkpoint_written(tr))
    std::printf("checkpoint in %s (try: salamander sample --checkpoint %s)\n", tr.checkpoint_dir().c_str(),
                tr.checkpoint_dir().c_str());
  if (!v.run_dir.empty())
    std::printf("report %s/report.html · logs, events.csv and metrics.csv in %s\n", v.run_dir.c_str(), v.run_dir.c_str());
}

Status write_run_outputs(const RunView& v, const nlohmann::ordered_json& j) {
  if (v.run_dir.empty()) return {};
  if (auto s = write_file(v.run_dir + "/summary.json", j.dump(2) + "\n"); !s) return s.error().with_context("summary.json");
  if (auto s = report::write_run_report(v.run_dir); !s) return s.error().with_context("report.html");
  return {};
}

}  // namespace sal::cli

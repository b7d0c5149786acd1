// run_files.cpp — see run_files.h.
#include "report/run_files.h"

#include <cctype>
#include <variant>

#include "core/paths.h"
#include "core/strings.h"
#include "job/steps.h"
#include "report/csv.h"

namespace sal::report {
namespace {

// A CSV column and the member of Row it fills (parsed as the member's type).
template <class Row>
using Member = std::variant<double Row::*, uint64_t Row::*, int64_t Row::*, std::string Row::*>;
template <class Row>
using Fields = std::vector<std::pair<std::string, Member<Row>>>;

const Fields<StepRow> kMetricFields = {{"step", &StepRow::step},
                                       {"loss", &StepRow::loss},
                                       {"ce", &StepRow::ce},
                                       {"aux", &StepRow::aux},
                                       {"grad_norm", &StepRow::grad_norm},
                                       {"lr", &StepRow::lr},
                                       {"tokens", &StepRow::tokens},
                                       {"step_ms", &StepRow::step_ms},
                                       {"compute_ms", &StepRow::compute_ms},
                                       {"tokens_per_s", &StepRow::tokens_per_s},
                                       {"workers", &StepRow::workers},
                                       {"plan", &StepRow::plan},
                                       {"time_s", &StepRow::time_s},
                                       {"imbalance", &StepRow::imbalance}};
const Fields<EventRow> kEventFields = {{"seq", &EventRow::seq},         {"mono_ns", &EventRow::mono_ns},
                                       {"wall_ms", &EventRow::wall_ms}, {"kind", &EventRow::kind},
                                       {"node", &EventRow::node},       {"epoch", &EventRow::epoch},
                                       {"detail", &EventRow::detail}};
const Fields<Interval> kTimelineFields = {{"start_s", &Interval::start_s},
                                          {"end_s", &Interval::end_s},
                                          {"phase", &Interval::phase},
                                          {"detail", &Interval::detail}};

template <class T, class Parse>
Status assign(T& out, Parse parsed) {
  if (!parsed) return parsed.error();
  out = *parsed;
  return ok_status();
}
Status field(const CsvFile& f, const CsvRecord& rec, const std::string& col, double& out) {
  return assign(out, f.number(rec, col));
}
Status field(const CsvFile& f, const CsvRecord& rec, const std::string& col, uint64_t& out) {
  return assign(out, f.count(rec, col));
}
Status field(const CsvFile& f, const CsvRecord& rec, const std::string& col, int64_t& out) {
  return assign(out, f.integer(rec, col));
}
Status field(const CsvFile& f, const CsvRecord& rec, const std::string& col, std::string& out) {
  return assign(out, f.text(rec, col));
}

// Reads every record of a CSV file into Rows, one member per column.
template <class Row>
Result<std::vector<Row>> read_rows(const std::string& path, const Fields<Row>& fields) {
  std::vector<std::string> columns;
  for (const auto& [column, member] : fields) columns.push_back(column);
  auto file = CsvFile::read(path, columns);
  if (!file) return file.error();
  std::vector<Row> out;
  for (const auto& rec : file->records()) {
    Row row;
    for (const auto& f : fields) {
      const auto& column = f.first;  // not a structured binding: clang 14 cannot capture one
      Status st = std::visit([&](auto m) { return field(*file, rec, column, row.*m); }, f.second);
      if (!st) return st.error();
    }
    out.push_back(std::move(row));
  }
  return out;
}

// A plans.jsonl line; json type errors become Errors.
Result<PlanRecord> plan_line(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (!j.is_object()) return fail("expected a JSON object");
    PlanRecord p;
    p.plan = j.value("plan", uint64_t(0));
    p.step = j.value("step", uint64_t(0));
    p.time_s = j.value("time_s", 0.0);
    if (j.contains("workers")) {
      for (const auto& w : j["workers"]) p.workers.push_back(w.is_string() ? w.get<std::string>() : w.dump());
    }
    if (j.contains("placement")) j["placement"].get_to(p.placement);
    if (j.contains("loads")) j["loads"].get_to(p.loads);
    if (j.contains("groups")) j["groups"].get_to(p.groups);
    if (j.contains("stacks")) {
      const auto& s = j["stacks"];
      p.redundancy = s.value("redundancy", 0u);
      p.depth = s.value("depth", 0u);
      if (s.contains("hosts")) s["hosts"].get_to(p.hosts);
      if (s.contains("assignment")) s["assignment"].get_to(p.assignment);
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return fail(e.what());
  }
}

template <class T>
Result<std::vector<T>> optional_file(const std::string& path, Result<std::vector<T>> (*reader)(const std::string&)) {
  if (!path_exists(path)) return std::vector<T>{};
  return reader(path);
}

// The driver's reason for the step it aborts when the job stops, as the step_aborted event reads
// ("step 22: job stopping: job.stop() by ...").
const std::string kStopAbort = ": " + std::string(job::kStopReason);

// "worker 1.0 exited with code 0" (but not "code 0x1f" or "code 07").
bool clean_exit(const std::string& detail) {
  for (size_t at = detail.find("code 0"); at != std::string::npos; at = detail.find("code 0", at + 1)) {
    size_t next = at + 6;
    if (next == detail.size() || !std::isalnum(static_cast<unsigned char>(detail[next]))) return true;
  }
  return false;
}

}  // namespace

std::optional<double> Run::number(const std::string& key) const {
  auto it = summary.find(key);
  if (it == summary.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<std::string> Run::text(const std::string& key) const {
  auto it = summary.find(key);
  if (it == summary.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// metrics.csv: the fixed columns, and val_loss where the file has it (empty on steps not evaluated).
Result<std::vector<StepRow>> read_metrics(const std::string& path) {
  auto rows = read_rows(path, kMetricFields);
  if (!rows) return rows;
  auto file = CsvFile::read(path, {"step"});
  if (!file || !file->has("val_loss")) return rows;
  const auto& recs = file->records();
  for (size_t i = 0; i < recs.size() && i < rows->size(); ++i) {
    auto text = file->text(recs[i], "val_loss");
    if (!text || text->empty()) continue;
    auto v = file->number(recs[i], "val_loss");
    if (!v) return v.error();
    (*rows)[i].val_loss = *v;
  }
  return rows;
}

Result<std::vector<EventRow>> read_events(const std::string& path, std::optional<int64_t> started_mono_ns) {
  auto events = read_rows(path, kEventFields);
  if (!events || events->empty()) return events;
  int64_t zero = started_mono_ns.value_or(events->front().mono_ns);
  bool stopping = false;
  for (auto& e : *events) {
    e.time_s = double(e.mono_ns - zero) / 1e9;
    e.stopping = stopping;
    stopping = stopping || is_stop(e);
  }
  return events;
}

Result<std::vector<Interval>> read_timeline(const std::string& path) { return read_rows(path, kTimelineFields); }

Result<std::vector<PlanRecord>> read_plans(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  std::vector<PlanRecord> out;
  int n = 0;
  for (const auto& line : split(*text, '\n')) {
    ++n;
    if (trim(line).empty()) continue;
    auto p = plan_line(line);
    if (!p) return p.error().with_context(path + ": line " + std::to_string(n));
    out.push_back(std::move(*p));
  }
  return out;
}

Result<Run> load_run(const std::string& dir) {
  Run run;
  run.dir = dir;
  std::string summary_path = dir + "/summary.json";
  if (path_exists(summary_path)) {
    auto text = read_file(summary_path);
    if (!text) return text.error();
    try {
      run.summary = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      return fail(summary_path, ": ", e.what());
    }
    if (!run.summary.is_object()) return fail(summary_path, ": expected a JSON object");
  }
  auto metrics = read_metrics(dir + "/metrics.csv");
  if (!metrics) return metrics.error();
  run.metrics = std::move(*metrics);
  std::optional<int64_t> started;
  if (auto it = run.summary.find("started_mono_ns"); it != run.summary.end() && it->is_number())
    started = it->is_number_integer() ? it->get<int64_t>() : int64_t(it->get<double>());
  if (path_exists(dir + "/events.csv")) {
    auto events = read_events(dir + "/events.csv", started);
    if (!events) return events.error();
    run.events = std::move(*events);
  }
  auto timeline = optional_file<Interval>(dir + "/timeline.csv", read_timeline);
  if (!timeline) return timeline.error();
  run.timeline = std::move(*timeline);
  auto plans = optional_file<PlanRecord>(dir + "/plans.jsonl", read_plans);
  if (!plans) return plans.error();
  run.plans = std::move(*plans);
  return run;
}

bool is_stop(const EventRow& e) {
  if (e.kind == "step_aborted") return e.detail.find(kStopAbort) != std::string::npos;
  return e.kind == "steps_done" || e.kind == "stop_requested";
}

bool is_node_loss(const EventRow& e) { return e.kind == "node_dead" || (e.kind == "node_left" && !e.stopping); }

bool is_failure(const EventRow& e) {
  if (e.kind == "worker_exited") return !e.stopping && !clean_exit(e.detail);
  if (e.kind == "step_aborted") return !is_stop(e);
  return is_node_loss(e);
}

}  // namespace sal::report

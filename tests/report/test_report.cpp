// test_report.cpp — the run report and the comparison page, written from synthetic run directories:
// event marks, recovery causes, HTML escaping, errors naming file/line/column, re-executed steps,
// and the samples ratio against the checkpoint-restart run (samples/s when every run trained the same). The pieces of the run report as pure
// logic: stops told from failures, times placed on a step axis, recoveries as labelled spans, the
// strip's lanes, the paged events table, node names on the placement grid.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/compare_report.h"
#include "report/csv.h"
#include "report/events_table.h"
#include "report/report.h"
#include "report/run_charts.h"
#include "report/run_marks.h"
#include "report/run_report.h"
#include "report/svg.h"

using namespace sal::report;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/sal-report-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string sub(const std::string& name) const {
    std::filesystem::create_directories(path + "/" + name);
    return path + "/" + name;
  }
};

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

const char* kMetricsHeader =
    "step,loss,ce,aux,grad_norm,lr,tokens,step_ms,compute_ms,tokens_per_s,workers,plan,time_s,imbalance\n";

// Rows for `steps` in order (repeats allowed), one per second, 4 workers dropping to 3 at step 5.
std::string metrics(const std::vector<int>& steps) {
  std::string out = kMetricsHeader;
  for (size_t i = 0; i < steps.size(); ++i) {
    int s = steps[i];
    out += std::to_string(s) + "," + std::to_string(4.0 - 0.1 * s) + ",3.9,0.01,1.2,0.001,4096,250.0,200.0,16384.0," +
           (s < 5 ? "4" : "3") + ",1," + std::to_string(1.0 + double(i)) + ",1.1\n";
  }
  return out;
}

// A run with two real failures, a clean worker exit (not a failure), a drill, a restore and a recovery.
void write_full_run(const std::string& dir) {
  put(dir + "/metrics.csv", metrics({1, 2, 3, 4, 5, 4, 5, 6}));
  put(dir + "/summary.json", R"json({"job":"tiny","mode":"elastic","drill":"kill-one","steps":6,"samples":48,
    "lost_steps":2,"restores":1,"recovery_p50_s":1.5,"recovery_max_s":2.5,"elapsed_s":9.0,"tokens_per_s":16000,
    "first_loss":3.9,"final_loss":3.4,"started_mono_ns":1000000000,
    "recoveries":[{"cause":"node 3 dead","at_s":4.6,"seconds":1.5,"step":5,"kind":"elastic"},
                  {"cause":"worker 2.0 exited (code 9)","at_s":5.1,"seconds":2.5,"step":6,"kind":"restore"}],
    "expectations":[{"what":"recovers","ok":true,"detail":"2 recoveries"},{"what":"no lost steps","ok":false,"detail":"2 lost"}]})json");
  put(dir + "/events.csv",
      "seq,mono_ns,wall_ms,kind,node,epoch,detail\n"
      "1,1000000000,0,started,,1,\n"
      "2,5500000000,0,drill,3,1,\"kill node 3 at step 5, during alltoall\"\n"
      "3,5600000000,0,node_dead,3,1,missed 3 heartbeats\n"
      "4,6000000000,0,worker_exited,2,1,worker 2.0 exited with code 0\n"
      "5,6100000000,0,worker_exited,2,2,worker 2.0 exited with code 0x9 (code 9)\n"
      "6,6200000000,0,restore_begun,,2,from step 4\n"
      "7,7000000000,0,recovered,,3,<b>resumed</b> & \"quoted\"\n"
      "8,9000000000,0,steps_done,,3,6 steps\n"
      "9,9100000000,0,node_left,1,3,stopped\n"
      "10,9100000000,0,worker_exited,1,3,worker 1.0 killed by signal 15\n");
  put(dir + "/timeline.csv",
      "start_s,end_s,phase,detail\n0,4.5,compute,\n4.5,5.5,reconfigure,drop node 3\n5.5,6.5,restore,step "
      "4\n6.5,9,compute,\n");
  put(dir + "/plans.jsonl",
      R"({"plan":1,"step":0,"time_s":0.5,"workers":["1.0","2.0"],"placement":[[[0,1],[2,3]]],"loads":[[10,20,30,40]]})"
      "\n"
      R"({"plan":2,"step":5,"time_s":5.5,"workers":["1.0","2.0"],"placement":[[[0,1,3],[2,3,0]]],"loads":[[12.5,20,30,45]]})"
      "\n");
}

std::string summary_json(const std::string& mode, int samples) {
  return "{\"job\":\"tiny\",\"mode\":\"" + mode + "\",\"steps\":10,\"samples\":" + std::to_string(samples) +
         ",\"elapsed_s\":10}";
}

}  // namespace

TEST_CASE("the run report marks each failure and lists each recovery's cause") {
  TempDir tmp;
  std::string run = tmp.sub("run");
  write_full_run(run);
  auto st = write_run_report(run);
  REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message()));
  std::string html = slurp(run + "/report.html");
  // Each on the throughput plot (time) and the loss plot (step). Failures: node_dead + worker_exited
  // (code 9); not the clean exit (code 0) nor the nodes leaving after steps_done.
  CHECK(occurrences(html, "class=\"mark failure\"") == 2 * 2);
  CHECK(occurrences(html, "class=\"mark stop\"") == 2);  // steps_done
  CHECK(occurrences(html, "class=\"mark drill\"") == 2);
  CHECK(occurrences(html, "class=\"mark restore\"") == 2);
  CHECK(occurrences(html, "class=\"span recovery\"") == 2);  // the elastic recovery
  CHECK(occurrences(html, "class=\"span recovery-restore\"") == 2);
  CHECK(html.find(">1.50 s</text>") != std::string::npos);  // each recovery labelled with its duration
  CHECK(html.find(">restore 2.50 s</text>") != std::string::npos);
  CHECK(occurrences(html, "class=\"band reconfigure\"") == 1);  // on the throughput plot
  CHECK(html.find("<h3>Gradient norm</h3>") != std::string::npos);
  CHECK(html.find("<h3>Learning rate</h3>") != std::string::npos);
  CHECK(html.find("<h3>Expert imbalance</h3>") != std::string::npos);
  CHECK(html.find("node 3 dead") != std::string::npos);
  CHECK(html.find("worker 2.0 exited (code 9)") != std::string::npos);
  CHECK(occurrences(html, "<span class=\"pass\">PASS</span>") == 1);
  CHECK(occurrences(html, "<span class=\"fail\">FAIL</span>") == 1);
  CHECK(html.find("kill node 3 at step 5, during alltoall") != std::string::npos);
  CHECK(html.find("×2") != std::string::npos);  // expert 0 and 3 have two replicas under plan 2
}

TEST_CASE("event details are HTML-escaped") {
  TempDir tmp;
  std::string run = tmp.sub("run");
  write_full_run(run);
  REQUIRE(write_run_report(run).ok());
  std::string html = slurp(run + "/report.html");
  CHECK(html.find("<b>resumed</b>") == std::string::npos);
  CHECK(html.find("&lt;b&gt;resumed&lt;/b&gt; &amp; &quot;quoted&quot;") != std::string::npos);
}

TEST_CASE("events are placed on the summary's clock") {
  TempDir tmp;
  std::string run = tmp.sub("run");
  write_full_run(run);
  auto loaded = load_run(run);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->events.size() == 10);
  CHECK(loaded->events[2].time_s == doctest::Approx(4.6));
  CHECK(loaded->events[1].detail == "kill node 3 at step 5, during alltoall");
}

TEST_CASE("a missing metrics.csv is an error naming the file") {
  TempDir tmp;
  std::string run = tmp.sub("empty");
  auto st = write_run_report(run);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find(run + "/metrics.csv") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(run + "/report.html"));
}

TEST_CASE("a malformed metrics line is an error naming file, line and column") {
  TempDir tmp;
  std::string run = tmp.sub("bad");
  std::string text = metrics({1, 2});
  text += "3,oops,3.9,0.01,1.2,0.001,4096,250.0,200.0,16384.0,4,1,3.0,1.1\n";
  put(run + "/metrics.csv", text);
  auto st = write_run_report(run);
  REQUIRE_FALSE(st.ok());
  const std::string& msg = st.error().message();
  CHECK(msg.find("metrics.csv: line 4, column 2 (loss)") != std::string::npos);
  CHECK(msg.find("oops") != std::string::npos);

  put(run + "/metrics.csv", metrics({1}) + "2,3.9\n");
  st = write_run_report(run);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("metrics.csv: line 3: expected 14 fields, got 2") != std::string::npos);
}

TEST_CASE("a malformed plans line is an error naming file and line") {
  TempDir tmp;
  std::string run = tmp.sub("run");
  put(run + "/metrics.csv", metrics({1, 2}));
  put(run + "/plans.jsonl", "{\"plan\":1}\n{\"plan\":2,\"placement\":\"x\"}\n");
  auto st = write_run_report(run);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("plans.jsonl: line 2") != std::string::npos);
}

TEST_CASE("optional files may be missing and --out writes elsewhere") {
  TempDir tmp;
  std::string run = tmp.sub("run");
  put(run + "/metrics.csv", metrics({1, 2, 3}));
  std::string out = tmp.path + "/elsewhere.html";
  REQUIRE(write_run_report(run, out).ok());
  CHECK_FALSE(std::filesystem::exists(run + "/report.html"));
  std::string html = slurp(out);
  CHECK(html.find("<h2>Throughput</h2>") != std::string::npos);
  CHECK(html.find("<h2>Events</h2>") == std::string::npos);
  CHECK(html.find("<h2>Expert placement</h2>") == std::string::npos);
  CHECK(html.find("–") != std::string::npos);  // summary fields shown as missing
}

TEST_CASE("re-executed step numbers are kept in time order") {
  TempDir tmp;
  std::string run = tmp.sub("run");
  put(run + "/metrics.csv", metrics({1, 2, 3, 4, 3, 4, 5}));
  put(run + "/summary.json", R"({"steps":5,"samples":40})");
  REQUIRE(write_run_report(run).ok());
  std::string html = slurp(run + "/report.html");
  CHECK(html.find("re-executed step") != std::string::npos);
  auto loaded = load_run(run);
  REQUIRE(loaded.ok());
  CHECK(loaded->metrics.size() == 7);
  CHECK(loaded->metrics[4].step == 3);
  CHECK(cumulative_samples(*loaded) == std::vector<double>{8, 16, 24, 32, 32, 32, 40});
}

TEST_CASE("the comparison measures samples against the checkpoint-restart run") {
  TempDir tmp;
  std::vector<std::string> dirs;
  std::vector<std::pair<std::string, int>> runs = {{"elastic", 250}, {"checkpoint-restart", 100}, {"fixed-ep-ft", 150}};
  for (const auto& [mode, samples] : runs) {
    std::string dir = tmp.sub(mode);
    put(dir + "/metrics.csv", metrics({1, 2, 3}));
    put(dir + "/summary.json", summary_json(mode, samples));
    dirs.push_back(dir);
  }
  std::string out = tmp.path + "/compare.html";
  auto st = write_comparison(dirs, out);
  REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message()));
  std::string html = slurp(out);
  CHECK(html.find("2.50×") != std::string::npos);
  CHECK(html.find("1.50×") != std::string::npos);
  CHECK(html.find("1.00× (baseline)") != std::string::npos);
  CHECK(html.find("samples vs checkpoint-restart") != std::string::npos);
  CHECK(html.find("25.0") != std::string::npos);  // elastic: 250 samples / 10 s

  auto missing = write_comparison({dirs[0], tmp.path + "/nope"}, out);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("nope/metrics.csv") != std::string::npos);
}

TEST_CASE("runs that trained the same samples are compared on samples per second, not 1.00x") {
  TempDir tmp;
  std::vector<std::string> dirs;
  std::vector<std::pair<std::string, double>> runs = {{"elastic", 8}, {"checkpoint-restart", 20}};
  for (const auto& [mode, elapsed] : runs) {
    std::string dir = tmp.sub(mode);
    put(dir + "/metrics.csv", metrics({1, 2, 3}));
    put(dir + "/summary.json", "{\"job\":\"tiny\",\"mode\":\"" + mode +
                                   "\",\"steps\":10,\"samples\":160,\"elapsed_s\":" + std::to_string(elapsed) + "}");
    dirs.push_back(dir);
  }
  std::string out = tmp.path + "/compare.html";
  REQUIRE(write_comparison(dirs, out).ok());
  std::string html = slurp(out);
  CHECK(html.find("samples/s vs checkpoint-restart") != std::string::npos);
  CHECK(html.find("2.50×") != std::string::npos);  // 160 / 8 s against 160 / 20 s
  CHECK(html.find("samples vs checkpoint-restart") == std::string::npos);
}

TEST_CASE("without a checkpoint-restart run the first run is the baseline") {
  TempDir tmp;
  std::vector<std::string> dirs;
  for (auto [name, samples] : {std::pair<const char*, int>{"a", 80}, {"b", 200}}) {
    std::string dir = tmp.sub(name);
    put(dir + "/metrics.csv", metrics({1, 2}));
    put(dir + "/summary.json", summary_json("elastic", samples));
    dirs.push_back(dir);
  }
  std::string out = tmp.path + "/compare.html";
  REQUIRE(write_comparison(dirs, out).ok());
  std::string html = slurp(out);
  CHECK(html.find("elastic (a)") != std::string::npos);  // repeated labels get the directory
  CHECK(html.find("2.50×") != std::string::npos);
  CHECK(html.find("1.00× (baseline)") != std::string::npos);
}

TEST_CASE("CSV records: quoted fields with commas, quotes and newlines") {
  auto recs = parse_csv("a,b\n1,\"x, \"\"y\"\"\nz\"\n\n2,\r\n", "f.csv");
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 3);
  CHECK((*recs)[1].fields == std::vector<std::string>{"1", "x, \"y\"\nz"});
  CHECK((*recs)[2].line == 5);
  CHECK((*recs)[2].fields == std::vector<std::string>{"2", ""});
  auto bad = parse_csv("a\n\"open\n", "f.csv");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "f.csv: line 2: unterminated quoted field");
}

TEST_CASE("axis ticks fall on nice numbers") {
  auto t = nice_ticks(0, 97, 5);
  CHECK(t.step == 20);
  CHECK(t.hi == 100);
  CHECK(t.values.size() == 6);
  auto w = nice_ticks(0, 12, 5, true);
  CHECK(w.step == 2);
  CHECK(nice_ticks(3, 3).values.size() >= 2);
  CHECK(tick_text(2500, 500) == "2.5k");
  CHECK(tick_text(0.25, 0.05) == "0.25");
}

namespace {

EventRow event(double t, const std::string& kind, const std::string& detail, const std::string& node = "") {
  EventRow e;
  e.time_s = t;
  e.kind = kind;
  e.detail = detail;
  e.node = node;
  return e;
}

StepRow row(uint64_t step, double time_s) {
  StepRow r;
  r.step = step;
  r.time_s = time_s;
  r.loss = 4.0 - 0.01 * double(step);
  return r;
}

// Steps 0..n-1 committed at 1 s, 2 s, ...
std::vector<StepRow> rows(uint64_t n) {
  std::vector<StepRow> out;
  for (uint64_t s = 0; s < n; ++s) out.push_back(row(s, 1.0 + double(s)));
  return out;
}

// The height attribute of the first <svg>.
double svg_height(const std::string& svg) {
  size_t at = svg.find("height=\"") + 8;
  return std::stod(svg.substr(at, svg.find('"', at) - at));
}

// Marks the stop flag as read_events does (after the first stop event).
std::vector<EventRow> in_order(std::vector<EventRow> events) {
  bool stopping = false;
  for (auto& e : events) {
    e.stopping = stopping;
    stopping = stopping || is_stop(e);
  }
  return events;
}

}  // namespace

TEST_CASE("a stop is drawn as a stop, once, and what follows it is no failure") {
  Run run;
  run.metrics = rows(23);
  run.events =
      in_order({event(23.5, "step_aborted", "step 22: job stopping: job.stop() by local (admin, REPL session 1)"),
                event(23.6, "checkpoint_saved", "21 units of step 22"),
                event(23.7, "stop_requested", "stopped after 22 steps: job.stop() by local"),
                event(23.8, "worker_exited", "worker 1.0 killed by signal 15", "1"),
                event(23.9, "node_left", "stopped: stopped after 22 steps", "1")});
  CHECK(is_stop(run.events[0]));
  CHECK_FALSE(is_failure(run.events[0]));
  CHECK_FALSE(is_failure(run.events[3]));
  CHECK_FALSE(is_failure(run.events[4]));
  for (Axis axis : {Axis::time, Axis::step}) {
    auto marks = event_marks(run, axis);
    REQUIRE(marks.size() == 2);  // the stop, and the final checkpoint written (a tick)
    CHECK(marks[0].kind == "stop");
    CHECK(marks[0].label == "stopped");
    CHECK_FALSE(marks[0].dashed);
    CHECK(marks[1].kind == "saved");
  }
  CHECK(event_marks(run, Axis::time)[0].x == doctest::Approx(23.5));
  CHECK(event_marks(run, Axis::step)[0].x == doctest::Approx(22.5));

  // a step aborted for another reason is a failure; a completed run's stop says so
  CHECK(is_failure(event(3, "step_aborted", "step 3: node 6 lost: connection closed")));
  auto done = event_mark(event(9, "steps_done", "100 steps committed"));
  REQUIRE(done);
  CHECK(done->label == "completed");
  CHECK(event_group(run.events[0]) == "stop");
}

TEST_CASE("times fall on the step axis between the steps committed around them") {
  auto m = rows(5);             // step s committed at 1 + s seconds
  CHECK(step_at(m, 0.2) == 0);  // before the first commit: the first step
  CHECK(step_at(m, 1.0) == 0);  // at a commit: that step
  CHECK(step_at(m, 2.25) == doctest::Approx(1.25));
  CHECK(step_at(m, 5.5) == doctest::Approx(4.5));  // after the last: as long as the step before took
  CHECK(step_at(m, 99) == doctest::Approx(5));
  // after a restore the step number goes back: an event between is put half a step on
  auto restored = rows(4);
  restored.push_back(row(2, 6.0));
  CHECK(step_at(restored, 4.5) == doctest::Approx(3.5));
  CHECK(step_at({}, 3) == 0);
}

TEST_CASE("the loss is drawn against step: a restore lifts the pen and re-executed steps are points") {
  std::vector<StepRow> m = {row(0, 1), row(1, 2), row(2, 3), row(1, 5), row(2, 6), row(3, 7)};
  auto curve = step_curve(m, [](const StepRow& r) { return r.loss; });
  REQUIRE(curve.line.x.size() == 7);  // six rows and one break
  CHECK(std::isnan(curve.line.x[3]));
  CHECK(curve.line.x[4] == 1);
  CHECK(curve.redone.x == std::vector<double>{1, 2});
  CHECK(curve.redone.draw == Draw::Points);
}

TEST_CASE("recoveries come from the summary, else from the recovered events") {
  Run run;
  run.metrics = rows(30);
  run.events = {
      event(7.35, "step_aborted", "step 20: node 6 lost"),
      event(7.67, "recovered", "training resumed: step 20 committed 324 ms after step 20 aborted: node 6 lost"),
      event(12.0, "node_dead", "missed 3 heartbeats", "2"), event(12.5, "restore_begun", "from step 10"),
      event(14.0, "recovered", "training resumed: step 11 committed 2000 ms after node 2 lost")};
  auto from_events = run_recoveries(run);
  REQUIRE(from_events.size() == 2);
  CHECK(from_events[0].at_s == doctest::Approx(7.346));
  CHECK(from_events[0].seconds == doctest::Approx(0.324));
  CHECK(from_events[0].step == 20);
  CHECK(from_events[0].kind == "elastic");
  CHECK(from_events[0].cause == "step 20 aborted: node 6 lost");
  CHECK(from_events[1].kind == "restore");

  run.summary =
      nlohmann::json::parse(R"({"recoveries":[{"at_s":7.3,"seconds":0.1,"step":20,"kind":"elastic","cause":"x"}]})");
  auto from_summary = run_recoveries(run);
  REQUIRE(from_summary.size() == 1);
  CHECK(from_summary[0].seconds == doctest::Approx(0.1));
}

TEST_CASE("a 0.1 s recovery in a long run is a visible span labelled with its duration") {
  Run run;
  run.metrics = rows(60);
  run.summary = nlohmann::json::parse(
      R"({"recoveries":[{"at_s":20.45,"seconds":0.1,"step":20,"kind":"elastic","cause":"node 6 lost"}]})");
  run.events = {event(20.45, "node_dead", "connection closed", "6")};
  auto time_spans = recovery_spans(run, Axis::time);
  REQUIRE(time_spans.size() == 1);
  CHECK(time_spans[0].label == "100 ms");
  CHECK(time_spans[0].x0 == doctest::Approx(20.45));
  CHECK(time_spans[0].x1 == doctest::Approx(20.55));
  CHECK(time_spans[0].title.find("node 6 lost") != std::string::npos);
  auto step_spans = recovery_spans(run, Axis::step);
  REQUIRE(step_spans.size() == 1);
  CHECK(step_spans[0].x0 == doctest::Approx(19.45));
  CHECK(step_spans[0].x1 == doctest::Approx(19.55));

  LineChart c;
  c.series = {{"loss", "#000", Draw::Line, false, {0, 60}, {1, 2}}};
  c.spans = time_spans;
  c.marks = event_marks(run, Axis::time);
  std::string svg = line_chart(c);
  CHECK(svg.find(">100 ms</text>") != std::string::npos);
  CHECK(occurrences(svg, "class=\"span recovery\"") == 1);
  CHECK(occurrences(svg, "class=\"mark failure\"") == 1);
  CHECK(duration_text(2.434) == "2.43 s");
  CHECK(duration_text(0.0849) == "85 ms");
}

TEST_CASE("labels above the plot take the first lane where they do not overlap") {
  auto lanes = strip_lanes({{100, 150}, {110, 160}, {120, 170}, {130, 180}, {200, 220}, {158, 190}});
  CHECK(lanes == std::vector<int>{0, 1, 2, -1, 0, 0});  // the last fits after the first, with the gap
  // the chart grows by the lanes it uses and draws every label that has a lane
  LineChart c;
  c.series = {{"y", "#000", Draw::Line, false, {0, 100}, {0, 1}}};
  c.spans = {{10, 10.1, "recovery", "#43a047", "120 ms", ""}, {10.2, 10.3, "recovery", "#43a047", "130 ms", ""}};
  std::string two = line_chart(c);
  CHECK(two.find(">120 ms</text>") != std::string::npos);
  CHECK(two.find(">130 ms</text>") != std::string::npos);
  c.spans.clear();
  CHECK(svg_height(two) - svg_height(line_chart(c)) == doctest::Approx(2 * 14 + 4));  // two lanes
}

TEST_CASE("snapshots written are ticks, dropped, failed and slow ones dashed marks") {
  auto saved = event_mark(event(3, "snapshot_saved", "step 100 in snapshots/step-100"));
  REQUIRE(saved);
  CHECK(saved->kind == "saved");
  CHECK(saved->tick);
  auto final_checkpoint = event_mark(event(9, "checkpoint_saved", "step 200 in checkpoint"));
  REQUIRE(final_checkpoint);
  CHECK(final_checkpoint->kind == "saved");
  for (const char* kind : {"snapshot_dropped", "snapshot_failed", "snapshot_slow", "checkpoint_failed"}) {
    CAPTURE(kind);
    auto m = event_mark(event(5, kind, "step 150"));
    REQUIRE(m);
    CHECK(m->kind == "save-trouble");
    CHECK(m->dashed);
  }
  auto legend = mark_legend({*saved, *event_mark(event(5, "snapshot_slow", "x"))}, {}, {});
  REQUIRE(legend.size() == 2);
}

TEST_CASE("gray failures on the timeline: a worker named slow is a dashed mark, its speed back a tick") {
  auto slow = event_mark(event(4, "node_slow", "worker 2.0 computes 2.99x the others' time"));
  REQUIRE(slow);
  CHECK(slow->kind == "slow");
  CHECK(slow->dashed);
  auto back = event_mark(event(6, "node_speed_back", "worker 2.0 is back to 1.11x the others' time"));
  REQUIRE(back);
  CHECK(back->kind == "speed-back");
  CHECK(back->tick);
  CHECK(mark_legend({*slow, *back}, {}, {}).size() == 2);
}

TEST_CASE("policy swaps and drill actions are ticks, other events are not drawn") {
  auto swap = event_mark(event(3, "policy_loaded", "placement: spread gen 2 from policies/placement/spread.lua"));
  REQUIRE(swap);
  CHECK(swap->kind == "policy");
  CHECK(swap->tick);
  auto rollback = event_mark(event(4, "policy_rollback", "placement: spread gen 2 -> mro gen 1"));
  REQUIRE(rollback);
  CHECK(rollback->kind == "policy");
  auto drill = event_mark(event(5, "drill", "kill 1 random node after step 20 -> node 6", "6"));
  REQUIRE(drill);
  CHECK(drill->kind == "drill");
  CHECK_FALSE(event_mark(event(6, "plan_applied", "plan 2 in force")));
  CHECK_FALSE(event_mark(event(6, "recovered", "training resumed")));  // drawn as the recovery's span
  auto legend = mark_legend({*swap, *drill}, {}, {});
  REQUIRE(legend.size() == 2);
  CHECK(legend[0].label == "drill action");
  CHECK(legend[1].label == "policy swap");
}

TEST_CASE("the events table is paged in the page, each row with its kind and group") {
  std::vector<EventRow> events;
  for (int i = 0; i < 30; ++i)
    events.push_back(event(i, "worker_ready", "worker " + std::to_string(i) + ".0 on cpu:0"));
  events.push_back(event(31, "node_dead", "missed 3 heartbeats", "3"));
  events.push_back(event(32, "recovered", "training resumed"));
  events.push_back(event(33, "policy_loaded", "placement: <b>spread</b>"));
  std::string html = events_section(events);
  CHECK(occurrences(html, "<tr data-kind=") == 33);
  CHECK(html.find("<tr data-kind=\"node_dead\" class=\"failure\">") != std::string::npos);
  CHECK(html.find("<tr data-kind=\"recovered\" class=\"recovery\">") != std::string::npos);
  CHECK(html.find("<tr data-kind=\"policy_loaded\" class=\"action\">") != std::string::npos);
  CHECK(html.find("&lt;b&gt;spread&lt;/b&gt;") != std::string::npos);
  CHECK(html.find("<script>") != std::string::npos);
  CHECK(html.find("var size = 25,") != std::string::npos);
  CHECK(html.find("id=\"ev-controls\" class=\"controls\" hidden") != std::string::npos);  // shown by the script
  std::string options = event_filter_options(events);
  CHECK(options.find("<option value=\"\">every event (33)</option>") == 0);
  CHECK(options.find("<option value=\"@failure\">failures (1)</option>") != std::string::npos);
  CHECK(options.find("<option value=\"worker_ready\">worker_ready (30)</option>") != std::string::npos);
  CHECK(options.find("@stop") == std::string::npos);  // no stop in these events
  CHECK(events_section({}).empty());
}

TEST_CASE("placement rows carry the names the nodes joined with") {
  std::vector<EventRow> events = {event(0.5, "node_joined", "node1 from 127.0.0.1:39680 with 1 device(s)", "1"),
                                  event(0.6, "node_joined", "gpu-a17 from 10.0.0.7:5000 with 8 device(s)", "12"),
                                  event(0.7, "node_dead", "missed 3 heartbeats", "1")};
  auto names = node_names(events);
  CHECK(names.size() == 2);
  CHECK(worker_label("1.0", names) == "node1 · 1.0");
  CHECK(worker_label("12.3", names) == "gpu-a17 · 12.3");
  CHECK(worker_label("4.0", names) == "4.0");

  TempDir tmp;
  std::string run = tmp.sub("run");
  write_full_run(run);
  put(run + "/events.csv",
      "seq,mono_ns,wall_ms,kind,node,epoch,detail\n"
      "1,1000000000,0,node_joined,1,1,alpha from 127.0.0.1:1 with 1 device(s)\n");
  REQUIRE(write_run_report(run).ok());
  CHECK(slurp(run + "/report.html").find(">alpha · 1.0</text>") != std::string::npos);
}

// test_report.cpp — the run report and the comparison page, written from synthetic run directories:
// event marks, recovery causes, HTML escaping, errors naming file/line/column, re-executed steps,
// and the samples ratio against the checkpoint-restart run.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/compare_report.h"
#include "report/csv.h"
#include "report/report.h"
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
    "recoveries":[{"cause":"node 3 dead","seconds":1.5,"step":5,"kind":"elastic"},
                  {"cause":"worker 2.0 exited (code 9)","seconds":2.5,"step":6,"kind":"restore"}],
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
  // node_dead + worker_exited (code 9); not the clean exit (code 0) nor the nodes leaving after steps_done
  CHECK(occurrences(html, "class=\"mark failure\"") == 2);
  CHECK(occurrences(html, "class=\"mark recovered\"") == 1);
  CHECK(occurrences(html, "class=\"mark drill\"") == 1);
  CHECK(occurrences(html, "class=\"mark restore\"") == 1);
  CHECK(occurrences(html, "class=\"band reconfigure\"") == 2);  // on the throughput and loss plots
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

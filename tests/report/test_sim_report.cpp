// test_sim_report.cpp — the simulator report written from hand-built result JSON: strategy labels,
// mean ± se formatting, plots over time (seconds or hours), the recovery table and plot, the sweep
// plot, results with missing fields, and errors that name the output path.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/html.h"
#include "report/sim_report.h"

using namespace sal::report;
using nlohmann::json;

namespace {

struct SimReportDir {
  std::string path;
  SimReportDir() {
    char tmpl[] = "/tmp/sal-simreport-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~SimReportDir() { std::filesystem::remove_all(path); }
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

json stat(double mean, double se) { return {{"mean", mean}, {"se", se}}; }

// One strategy's summary with mean JCT `jct`, time series in buckets of `bucket_s`, and a recovery
// array when asked (an empty one otherwise).
nlohmann::ordered_json strategy(const std::string& label, const std::string& kind, double jct, double bucket_s,
                                bool with_recovery) {
  nlohmann::ordered_json s = {{"label", label},
                              {"kind", kind},
                              {"checkpoint", "dense"},
                              {"trials", 4},
                              {"finished", 4},
                              {"jct_s", stat(jct, 12.5)},
                              {"samples", stat(32000, 0)},
                              {"steps", stat(1000, 0)},
                              {"lost_steps", stat(17.25, 3.5)},
                              {"ettr", stat(0.9512, 0.0041)},
                              {"availability", stat(0.875, 0.01)},
                              {"failures", stat(6.5, 1.25)},
                              {"masked", stat(2, 0.5)},
                              {"reconfigurations", stat(4.5, 0.75)},
                              {"restores", stat(1.5, 0.25)},
                              {"plans", stat(5, 0)},
                              {"plan_ms", stat(0.4321, 0.01)},
                              {"bucket_s", bucket_s},
                              {"goodput", {8.5, 9.0, 4.25, 8.75}},
                              {"live_nodes", {8, 8, 7.5, 8}}};
  s["recovery"] = json::array();
  if (with_recovery)
    s["recovery"] = {{{"k", 1}, {"failures", 40}, {"predicted", 0.8125}, {"observed", 0.775}},
                     {{"k", 2}, {"failures", 12}, {"predicted", 0.5312}, {"observed", 0.5}}};
  return s;
}

// Two strategies at two sweep points of failures.per_hour; the table metric normalised to salamander.
nlohmann::ordered_json full_result(double bucket_s = 60) {
  nlohmann::ordered_json r = {{"name", "lazarus-jct"}, {"source", "scripts/experiments/lazarus.lua"},
                              {"metric", "jct_s"},     {"normalise_to", "salamander"},
                              {"trials", 4},           {"seed", 7},
                              {"events", 123456},      {"wall_s", 3.25}};
  r["points"] = json::array();
  double rates[] = {0.01, 0.05};
  for (int p = 0; p < 2; ++p) {
    nlohmann::ordered_json point;
    point["params"] = {{"failures.per_hour", rates[p]}};
    point["strategies"] = {strategy("salamander", "salamander", 3600 + 100 * p, bucket_s, true),
                           strategy("ckpt-restart", "checkpoint-restart", 5400 + 900 * p, bucket_s, false)};
    r["points"].push_back(point);
  }
  return r;
}

}  // namespace

TEST_CASE("the sim report shows each strategy, its statistics and plots") {
  std::string html = sim_report_html(full_result());
  CHECK(html.find("<h1>Simulation: lazarus-jct</h1>") != std::string::npos);
  CHECK(html.find("scripts/experiments/lazarus.lua") != std::string::npos);
  CHECK(html.find("seed <b>7</b>") != std::string::npos);
  CHECK(html.find("events <b>123456</b>") != std::string::npos);
  CHECK(html.find("3.25 s") != std::string::npos);
  CHECK(count_of(html, "salamander") >= 4);
  CHECK(count_of(html, "ckpt-restart") >= 4);
  CHECK(html.find("Point 1 of 2: failures.per_hour = 0.01") != std::string::npos);
  CHECK(html.find("Point 2 of 2: failures.per_hour = 0.05") != std::string::npos);
  // mean ± se with each column's decimals
  CHECK(html.find("3600.0 ± 12.5") != std::string::npos);
  CHECK(html.find("6300.0 ± 12.5") != std::string::npos);
  CHECK(html.find("0.951 ± 0.004") != std::string::npos);
  CHECK(html.find("17.2 ± 3.5") != std::string::npos);
  CHECK(html.find("32000 ± 0") != std::string::npos);
  CHECK(html.find("<td>0.43</td>") != std::string::npos);  // plan ms
  CHECK(html.find("<td>4/4</td>") != std::string::npos);
  // normalised metric: ckpt-restart's JCT over salamander's at each point
  CHECK(html.find("jct_s ÷ salamander") != std::string::npos);
  CHECK(html.find("<td>1.500</td>") != std::string::npos);
  CHECK(html.find("<td>1.703</td>") != std::string::npos);
  CHECK(html.find("<td>1.000</td>") != std::string::npos);
  // plots: goodput and live nodes per point, recovery per point, one sweep plot
  CHECK(count_of(html, "<svg") == 2 * 3 + 1);
  CHECK(count_of(html, "Goodput over time") == 2);
  CHECK(html.find("time (s)") != std::string::npos);
  CHECK(html.find("Sweep: jct_s against failures.per_hour") != std::string::npos);
  // recovery: table rows with predicted and observed, only for the strategy that recorded them
  CHECK(html.find("<td>0.812</td><td>0.775</td>") != std::string::npos);
  CHECK(html.find("salamander predicted") != std::string::npos);
  CHECK(html.find("ckpt-restart predicted") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
}

TEST_CASE("a long simulation's time axis is in hours") {
  std::string html = sim_report_html(full_result(3600));
  CHECK(html.find("time (h)") != std::string::npos);
  CHECK(html.find("time (s)") == std::string::npos);
}

TEST_CASE("a result missing fields still renders, with placeholders") {
  json partial = json::parse(R"({"name": "old", "points": [{"strategies": [{"label": "a<b"}, {"kind": "spare"}]}]})");
  std::string html = sim_report_html(partial);
  CHECK(html.find("<h1>Simulation: old</h1>") != std::string::npos);
  CHECK(html.find("a&lt;b") != std::string::npos);
  CHECK(html.find("spare") != std::string::npos);
  CHECK(html.find("<h2>Results</h2>") != std::string::npos);
  CHECK(count_of(html, kMissing) > 20);
  CHECK(html.find("<svg") == std::string::npos);  // no series to draw
  CHECK(html.find("Recovery probability") == std::string::npos);

  json wrong_types = json::parse(R"({"trials": "many", "points": [5, {"params": 3, "strategies": [
      {"jct_s": "x", "ettr": {"mean": "y"}, "goodput": [1, "y", 3], "bucket_s": 10, "recovery": "none"}]}]})");
  std::string html2 = sim_report_html(wrong_types);
  CHECK(html2.find("strategy 1") != std::string::npos);
  CHECK(count_of(html2, "<svg") == 1);  // the goodput line, with a gap

  CHECK(sim_report_html(json::object()).find("no sweep points") != std::string::npos);
}

TEST_CASE("write_sim_report writes the page, and its errors name the path") {
  SimReportDir dir;
  std::string path = dir.path + "/sim.html";
  REQUIRE(write_sim_report(full_result(), path));
  CHECK(read_text(path) == sim_report_html(full_result()));

  std::string bad = dir.path + "/missing/sim.html";
  auto written = write_sim_report(full_result(), bad);
  REQUIRE_FALSE(written);
  CHECK(written.error().message().find(bad) != std::string::npos);

  auto not_object = write_sim_report(json::array(), path);
  REQUIRE_FALSE(not_object);
  CHECK(not_object.error().message().find(path) != std::string::npos);
  CHECK_FALSE(write_sim_report(full_result(), ""));
}

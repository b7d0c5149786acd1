// t0320_report_render.cpp — the run report looked at in a real browser: a short real run (a node
// killed part way) writes report.html, and headless Chromium (Debian's `chromium`) renders it. The
// screenshot must be a PNG of the window's size that is not blank (many colors, the plots' own
// colors among them), and the DOM after the page's script ran must hold the plots' SVG elements and
// the events table paged. Says skipped when chromium is not installed.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "support/mesh_harness.h"
#include "support/png.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr int kWidth = 1200, kHeight = 2400;
constexpr int kBrowserMs = 60000;  // a cold start on a loaded 2-core machine takes seconds

// The chromium binary on PATH, or "".
std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(at, end - at) + "/chromium";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

// Headless chromium on `page` with `what` (--screenshot=FILE or --dump-dom); its own profile in
// `dir`; returns what it printed (the DOM, for --dump-dom, among its log lines).
std::string chromium(const std::string& bin, const std::string& dir, const std::string& page, const std::string& what,
                     const std::string& log) {
  Proc p = spawn({bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                  "--user-data-dir=" + dir + "/profile",
                  "--window-size=" + std::to_string(kWidth) + "," + std::to_string(kHeight), what, "file://" + page},
                 log);
  int rc = p.wait(kBrowserMs);
  INFO(p.output());
  REQUIRE(rc == 0);
  return p.output();
}

std::string write_job(const std::string& dir) {
  MeshOptions shape;
  std::string path = dir + "/job.lua";
  std::ofstream(path) << "return {\n  name = 'render',\n"
                      << "  model = { layers = 1, d_model = 16, heads = 2, experts = 8, top_k = 2, seq_len = 16 },\n  "
                      << shape.data << "\n  train = { batch = 8, lr = 1e-2, warmup = 5 },\n"
                      << "  mesh = { nodes = 4 },\n  policies = { slots = 4 },\n}\n";
  return path;
}

}  // namespace

TEST_CASE("t0320-report-renders: headless Chromium draws a real run's report, plots and paged events") {
  const std::string browser = find_chromium();
  if (browser.empty()) {
    MESSAGE("skipped: no chromium on PATH (Debian's `chromium` package; scripts/dev.sh installs it)");
    return;
  }
  std::string dir = temp_dir("render");
  auto j = run_json({bin(), "run", write_job(dir), "--drill",
                     std::string(SAL_SOURCE_DIR) + "/tests/drills/report_render.lua", "--json", "--out", dir + "/run"},
                    dir + "/run.out", 90000);
  REQUIRE(j["nodes_lost"] == 1);
  const std::string page = dir + "/run/report.html";

  chromium(browser, dir, page, "--screenshot=" + dir + "/shot.png", dir + "/shot.out");
  Image shot = read_png(dir + "/shot.png");
  CHECK(shot.width == uint32_t(kWidth));
  CHECK(shot.height == uint32_t(kHeight));
  size_t colors = shot.distinct_colors();
  CHECK_MESSAGE(colors >= 200, colors << " distinct colors: the page looks blank");
  CHECK(shot.has_color(0x1f77b4));  // the throughput and loss lines, their legend swatches
  CHECK(shot.has_color(0xd32f2f));  // the failure's dashed line
  CHECK(shot.has_color(0x43a047));  // the recovery's bar above the plots
  CHECK(shot.has_color(0x2e7d32));  // a PASS badge

  // The same run's page written again by `salamander report`, its DOM after the script ran.
  Proc again = spawn({bin(), "report", dir + "/run", "--out", dir + "/again.html"}, dir + "/report.out");
  REQUIRE(again.wait(20000) == 0);
  std::string dom = chromium(browser, dir, dir + "/again.html", "--dump-dom", dir + "/dom.out");
  const auto rows = sal::test::events(dir + "/run");
  const size_t events = rows.size();
  REQUIRE(events > 25);  // more than one page
  const auto failures = size_t(std::count_if(rows.begin(), rows.end(), report::is_failure));
  CHECK(failures >= 1);  // the node's death (and the step it aborted, if one was in flight)
  CHECK(occurrences(dom, "<svg ") >= 8);
  CHECK(occurrences(dom, "class=\"mark failure\"") == 2 * failures);  // on the throughput and the loss plots
  CHECK(occurrences(dom, "class=\"mark stop\"") == 2);
  CHECK(occurrences(dom, "class=\"span recovery\"") == 2);
  CHECK(occurrences(dom, "<tr data-kind=") == events);
  CHECK(occurrences(dom, "hidden=\"\"") == events - 25);  // the rows past the first page, by the script
  CHECK(dom.find("id=\"ev-controls\" class=\"controls\">") != std::string::npos);  // shown by the script
  CHECK(dom.find("rows 1–25 of " + std::to_string(events) + " · page 1 of ") != std::string::npos);
}

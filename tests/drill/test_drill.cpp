// test_drill.cpp — drill scripts and trace replay: every kind of call is read as written, `args`
// reach the script, Lua loops schedule many actions, a spot trace in any of its formats (Bamboo's
// events, GCP counts, a series of counts; told apart) reads as node events, and its live-node count
// is scaled proportionally to the local mesh (with its adds and removes at the scaled times).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/paths.h"
#include "drill/drill_spec.h"
#include "drill/trace.h"
#include "support/temp_dirs.h"

using namespace sal::drill;
namespace sim = sal::sim;

namespace {

std::string temp_file(const std::string& name, const std::string& text) {
  std::string dir = sal::test::temp_dir("drill");
  std::ofstream(dir + "/" + name) << text;
  return dir + "/" + name;
}

}  // namespace

TEST_CASE("a drill script: header, every action kind, args and loops, expectations") {
  auto path = temp_file("d.lua", R"(
drill{ name = "demo", steps = 40, seed = 9, duration_s = 30 }
for i = 1, tonumber(args.n) do kill{ node = "random", step = 10 * i } end
kill{ node = 3, step = 5, during = "allreduce" }
kill{ expert = 2, layer = 1, at_s = 4.5 }
drain{ node = 0, at_s = 1 }
freeze{ node = "random", count = 2, step = 7, ms = 800 }
add{ count = 2, step = 20 }
partition{ node = 1, at_s = 3, for_s = 1.5 }
crash{ node = "random", count = 2, at_s = 6 }
expect{ lost_steps = 0, resume_s = 2.5, min_throughput_share = 0.4, min_restores = 1 }
)");
  auto d = load_drill(path, {{"n", "3"}});
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
  CHECK(d->name == "demo");
  CHECK(d->steps == 40);
  CHECK(d->seed == 9);
  CHECK(d->duration_s == 30.0);
  REQUIRE(d->actions.size() == 10);
  CHECK(d->actions[9].kind == ActionKind::crash);
  CHECK(d->actions[9].count == 2);
  CHECK(d->actions[9].describe().find("crash 2 random nodes at 6.0 s (its workers, not its agent)") == 0);
  CHECK(d->actions[8].kind == ActionKind::partition);
  CHECK(d->actions[8].ms == 1500);
  CHECK(d->actions[8].describe().find("partition node 1 at 3.0 s for 1.5 s") == 0);
  CHECK(d->partitions());
  CHECK(d->actions[2].step == 30);
  CHECK_FALSE(d->actions[2].node.has_value());
  CHECK(d->actions[3].node == 3u);
  CHECK(d->actions[3].during == sal::wire::FaultPoint::allreduce);
  CHECK(d->actions[4].holders_of == std::pair{1, 2});
  CHECK(d->actions[4].at_s == 4.5);
  CHECK(d->actions[5].kind == ActionKind::drain);
  CHECK(d->actions[5].node == 0u);  // the mesh numbers nodes from 0
  CHECK(d->actions[6].kind == ActionKind::freeze);
  CHECK(d->actions[6].count == 2);
  CHECK(d->actions[6].ms == 800);
  CHECK(d->actions[7].kind == ActionKind::add);
  CHECK(d->actions[3].describe().find("during the gradient all-reduce") != std::string::npos);
  CHECK(d->actions[3].describe().find("d.lua:4") != std::string::npos);
  CHECK(d->expect.lost_steps == 0u);
  CHECK(d->expect.resume_s == 2.5);
  CHECK(d->expect.min_throughput_share == 0.4);
  CHECK(d->expect.min_restores == 1u);
}

TEST_CASE("kill{controller = true} kills the controller, restarted after a delay, and marks the drill as needing a host") {
  auto path = temp_file("c.lua", "kill{ node = 2, step = 3 }\nkill{ controller = true, step = 5, restart_after_s = 2.5 }\n"
                                 "kill{ controller = true, at_s = 9 }\n");
  auto d = load_drill(path, {{"k", "v"}});
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
  REQUIRE(d->actions.size() == 3);
  CHECK_FALSE(d->actions[0].controller);
  CHECK(d->actions[1].controller);
  CHECK(d->actions[1].restart_after_s == 2.5);
  CHECK(d->actions[2].restart_after_s == 1.0);  // the default
  CHECK(d->controller_kill() == &d->actions[1]);
  CHECK(d->actions[1].describe().find("kill the controller after step 5, restarted after 2.5 s (") == 0);
  CHECK(d->args.at("k") == "v");  // kept: a resumed controller loads the drill again with them
  auto none = load_drill(temp_file("n.lua", "kill{ node = 2, step = 3 }"), {});
  REQUIRE(none.ok());
  CHECK(none->controller_kill() == nullptr);
  CHECK_FALSE(none->partitions());
}

TEST_CASE("kill{rack} kills every node of a rack, named by the job's mesh.racks") {
  auto d = load_drill(temp_file("r.lua", "kill{ rack = 'b', step = 15 }\n"), {});
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
  REQUIRE(d->actions.size() == 1);
  CHECK(d->actions[0].rack == "b");
  CHECK_FALSE(d->actions[0].node);
  CHECK(d->actions[0].describe().find("kill every node of rack b after step 15") == 0);
}

TEST_CASE("wrong drills name the line and the rule") {
  auto check = [](const std::string& text, const std::string& expect) {
    auto d = load_drill(temp_file("bad.lua", text), {});
    REQUIRE_FALSE(d.ok());
    CHECK_MESSAGE(d.error().message().find(expect) != std::string::npos, d.error().message());
  };
  check("\n\nfreeze{ node = 1, step = 2 }", "bad.lua:3: freeze: ms");
  check("crash{ node = 1, step = 2, ms = 5 }", "bad.lua:1: crash: unknown field 'ms' (fields: step, at_s, count, node)");
  check("kill{ node = 1, count = 2, step = 2 }", "count > 1 needs node = \"random\"");
  check("kill{ expert = 1, node = 2, step = 1 }", "`expert` picks the nodes itself");
  check("kill{ rack = 'b', node = 2, step = 1 }", "`rack` picks the nodes itself");
  check("kill{ rack = 'b', during = 'forward', step = 1 }", "`rack` picks the nodes itself");
  check("kill{ rack = '', step = 1 }", "kill.rack: a rack's name from the job's mesh.racks");
  check("drain{ rack = 'b', step = 1 }", "drain: unknown field 'rack'");
  check("expect{ lost_step = 0 }\nkill{ node = 1, step = 1 }", "unknown field 'lost_step' (did you mean 'lost_steps'?)");
  check("kill(3)", "takes one table of named fields");
  check("kill{ node = 1, step = -1 }", "kill.step: expected a number in [0");
  check("kill{ node = -1, step = 1 }",
        "bad.lua:1: kill.node: expected a node id (an integer from 0) or \"random\", got -1");
  check("kill{ node = 'first', step = 1 }", "or \"random\", got \"first\"");
  check("kill{ controller = true, node = 2, step = 1 }", "controller = true kills the controller, not nodes (no node)");
  check("kill{ controller = true, during = 'forward', step = 1 }", "(no during)");
  check("kill{ node = 1, step = 1, during = 'validaton' }",
        "kill.during: 'validaton' is not a point of the step (did you mean 'validation'?) (one of: forward, alltoall, "
        "allreduce, migration, snapshot, backward, validation)");
  check("partition{ node = 1, step = 1 }", "partition: for_s (how long the link stays cut) is required");
  check("partition{ node = 1, step = 1, for_s = 0 }", "partition.for_s: expected a number in [0.001, 3600]");
  check("partition{ node = 1, step = 1, for_s = 1, ms = 3 }", "partition: unknown field 'ms'");
  check("kill{ controller = 1, step = 1 }", "kill.controller: expected true or false, got 1");
  check("kill{ node = 1, restart_after_s = 2, step = 1 }", "`restart_after_s` goes with controller = true");
  check("kill{ controller = true, restart_after_s = -1, step = 1 }", "kill.restart_after_s: expected a number in [0, 3600]");
  // a value that is not UTF-8 is shown, not thrown (found by fuzz_drill)
  check("kill{ node = 1, step = 'x\\0\\255' }", "kill.step: expected a number in [0");
}

TEST_CASE("a Bamboo trace is scaled to the local mesh: live counts proportionally, times by time_scale") {
  // live: 4 at t=0, 8 at 1000 ms, 6 at 2000 ms, 2 at 3000 ms
  auto path = temp_file("t.csv",
                        "0,add,node1\n0,add,node2\n0,add,node3\n0,add,node4\n"
                        "1000,add,node5\n1000,add,node6\n1000,add,node7\n1000,add,node8\n"
                        "2000,remove,node1\n2000,remove,node5\n"
                        "3000,remove,node2\n3000,remove,node3\n3000,remove,node6\n3000,remove,node7\n");
  auto plan = trace_actions({path, 0.5, 4, 1.0});
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message()));
  CHECK(plan->peak == 8);
  CHECK(plan->initial_nodes == 2);  // 4 of 8 -> 2 of 4
  REQUIRE(plan->actions.size() == 3);
  CHECK(plan->actions[0].kind == ActionKind::add);   // 8 of 8 -> 4
  CHECK(plan->actions[0].count == 2);
  CHECK(plan->actions[0].at_s == doctest::Approx(1.5));
  CHECK(plan->actions[1].kind == ActionKind::kill);  // 6 of 8 -> 3
  CHECK(plan->actions[1].count == 1);
  CHECK(plan->actions[2].count == 2);                // 2 of 8 -> 1
  CHECK(plan->actions[2].at_s == doctest::Approx(2.5));
  CHECK(plan->actions[2].where == "t.csv:14");
  CHECK(plan->duration_s == doctest::Approx(1.5));
  CHECK(plan->time_scale == 0.5);
  // fit_s: the scale that makes the trace's 3 s last 30 s, whatever time_scale says
  TraceOptions fit{path, 0.5, 4, 1.0};
  fit.fit_s = 30;
  auto fitted = trace_actions(fit);
  REQUIRE(fitted.ok());
  CHECK(fitted->time_scale == doctest::Approx(10));
  CHECK(fitted->duration_s == doctest::Approx(30));
  CHECK(fitted->actions[0].at_s == doctest::Approx(1.0 + 10));
  CHECK(fitted->actions[2].at_s == doctest::Approx(1.0 + 30));
}

TEST_CASE("a trace of live-node counts reads as adds and removes, and scales like a Bamboo trace") {
  // live: 4, then 8 a second later, 6 a second after, 2 at the end
  auto path = temp_file("g.txt", "2021-12-11, 11:11:30, 4\n2021-12-11, 11:11:31, 8\n\n2021-12-11, 11:11:32, 6\n"
                                 "2021-12-11, 11:11:33, 2\n");
  auto events = sim::read_trace(path, {"counts"});
  REQUIRE_MESSAGE(events.ok(), (events.ok() ? "" : events.error().message()));
  CHECK(events->size() == 4 + 4 + 2 + 4);
  CHECK((*events)[4].ms == 1000);
  CHECK((*events)[8].add == false);
  CHECK((*events)[8].node == "node8");  // the newest goes first
  TraceOptions o{path, 0.5, 4, 1.0};
  o.format = "counts";
  auto plan = trace_actions(o);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message()));
  CHECK(plan->peak == 8);
  CHECK(plan->initial_nodes == 2);
  REQUIRE(plan->actions.size() == 3);
  CHECK(plan->actions[0].count == 2);
  CHECK(plan->actions[0].at_s == doctest::Approx(1.5));
  CHECK(plan->actions[2].where == "g.txt:5");
  // the errors name the file and the line
  auto bad = sim::parse_count_trace("2021-12-11, 11:11:30, 4\n2021-12-11 11:11, 5\n", "g.txt");
  CHECK(bad.error().message().find("g.txt:2: expected YYYY-MM-DD, HH:MM:SS, <live nodes>") != std::string::npos);
  auto back = sim::parse_count_trace("2021-12-11, 11:11:30, 4\n2021-12-11, 12:11:20, 5\n2021-12-11, 11:11:20, 5\n", "g.txt");
  CHECK(back.error().message().find("g.txt:3: time goes back (-3600 s after the previous line") != std::string::npos);
  // overlapping samples (a minute older than the line before) are taken in the file's order, at
  // the previous line's time
  auto overlap = sim::parse_count_trace("2021-12-11, 11:11:30, 4\n2021-12-11, 11:12:30, 4\n2021-12-11, 11:11:40, 3\n"
                                        "2021-12-11, 11:12:40, 3\n",
                                        "g.txt");
  REQUIRE_MESSAGE(overlap.ok(), (overlap.ok() ? "" : overlap.error().message()));
  REQUIRE(overlap->size() == 5);
  CHECK((*overlap)[4].add == false);
  CHECK((*overlap)[4].ms == 60000);
  CHECK((*overlap)[4].line == 3);
  // '#' lines are notes in every format, as auto-detection (which skips them) promises; the line
  // numbers stay the file's
  auto noted = sim::parse_count_trace("# gcloud v100, sampled by a script\n2021-12-11, 11:11:30, 4\n# resumed\n"
                                      "2021-12-11, 11:11:31, 5\n2021-12-11 11:11, 5\n", "g.txt");
  CHECK(noted.error().message().find("g.txt:5: expected YYYY-MM-DD") != std::string::npos);
  auto events_noted = sim::parse_bamboo_trace("# p3, us-east-1\n0,add,a\n\n# later\n1000,remove,a\n1000,nope,a\n", "b.csv");
  CHECK(events_noted.error().message().find("b.csv:6: event 'nope'") != std::string::npos);
  auto bamboo_noted = sim::parse_bamboo_trace("# p3, us-east-1\n0,add,a\n\n# later\n1000,remove,a\n", "b.csv");
  REQUIRE_MESSAGE(bamboo_noted.ok(), (bamboo_noted.ok() ? "" : bamboo_noted.error().message()));
  CHECK(bamboo_noted->size() == 2);
  CHECK((*bamboo_noted)[1].line == 5);
  CHECK(sim::read_trace(path, {"csv"}).error().message().find("expected auto, bamboo, counts or series") !=
        std::string::npos);
  // a drill replays it with format = "counts"; another format is refused, naming the two
  auto drill = temp_file("r.lua", "replay_trace{ file = '" + path + "', format = 'counts', time_scale = 0.5, max_nodes = 4 }\n");
  auto d = load_drill(drill, {});
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
  CHECK(d->initial_nodes == 2);
  CHECK(d->actions.size() == 3);
  auto wrong = temp_file("w.lua", "replay_trace{ file = '" + path + "', format = 'csv' }\n");
  auto refused = load_drill(wrong, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("'csv' is not a trace format (auto, bamboo, counts, series)") != std::string::npos);
}

TEST_CASE("a series of live-node counts: ISO times or numbers in a unit, a header, and the format told apart") {
  // CloudWatch's export: a header, ISO times (UTC, an offset applied), in-service instances
  const std::string cloudwatch =
      "timestamp,count\n2021-07-26T18:42:00Z,8\n2021-07-26T18:45:00Z,11\n2021-07-26 20:47:30+02:00,9\n";
  auto events = sim::parse_trace(cloudwatch, "asg.csv", {});
  REQUIRE_MESSAGE(events.ok(), (events.ok() ? "" : events.error().message()));
  REQUIRE(events->size() == 8 + 3 + 2);
  CHECK((*events)[8].ms == 180'000);
  CHECK((*events)[8].line == 3);
  CHECK((*events)[11].add == false);
  CHECK((*events)[11].ms == 330'000);  // 20:47:30 at +02:00 is 18:47:30 UTC
  CHECK((*events)[11].node == "node11");
  // numeric times in hours (Bamboo's notebook data, "_scaled" files); a step function's repeats
  // change nothing
  auto hours = sim::parse_trace("0.000,0\n5.980,0\n5.980,4\n6.5,4\n6.5,2\n", "g4dn.csv", {"series", 3600.0});
  REQUIRE_MESSAGE(hours.ok(), (hours.ok() ? "" : hours.error().message()));
  REQUIRE(hours->size() == 6);
  CHECK((*hours)[0].ms == 21'528'000);
  CHECK((*hours)[5].ms == 23'400'000);
  CHECK((*hours)[5].add == false);
  // auto tells the three formats apart
  CHECK(*sim::detect_trace_format("0,add,node1\n", "t") == "bamboo");
  CHECK(*sim::detect_trace_format("2021-12-11, 11:11:30, 4\n", "t") == "counts");
  CHECK(*sim::detect_trace_format("\ntime,count\n0,4\n", "t") == "series");
  CHECK(*sim::detect_trace_format("2021-07-26T18:42:00Z,8\n", "t") == "series");
  CHECK(*sim::detect_trace_format("# fleet size\ntime,count\n0,add,node1\n", "t") == "bamboo");
  auto commented = sim::parse_trace("# a comment\n\ntime,count\n0,4\n# later\n60,2\n", "c.csv", {});
  REQUIRE_MESSAGE(commented.ok(), (commented.ok() ? "" : commented.error().message()));
  CHECK(commented->size() == 6);
  CHECK(commented->back().line == 6);
  auto unknown = sim::detect_trace_format("1;b;c\n", "x.txt");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message().find("x.txt:1: cannot tell the trace's format from '1;b;c'") != std::string::npos);
  auto names_only = sim::detect_trace_format("a;b;c\n", "x.txt");
  REQUIRE_FALSE(names_only.ok());
  CHECK(names_only.error().message() == "x.txt: no lines after the column names 'a;b;c'");
  // Bamboo's events as other tools write them: column names, decimal milliseconds, the kind in capitals
  auto written = sim::parse_trace("time_ms,event,node\n0,add,a\n0.0,ADD,b\n1500.4, Remove ,a\n", "w.csv", {});
  REQUIRE_MESSAGE(written.ok(), (written.ok() ? "" : written.error().message()));
  REQUIRE(written->size() == 3);
  CHECK((*written)[1].add);
  CHECK((*written)[2].ms == 1500);
  CHECK_FALSE((*written)[2].add);
  CHECK((*written)[2].line == 4);
  for (const char* wrong : {"0,add,a\n-5,add,b\n", "0,add,a\n5ms,add,b\n", "0,add,a\nnan,add,b\n"}) {
    auto r = sim::parse_bamboo_trace(wrong, "w.csv");
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.error().message().find("w.csv:2: '") != std::string::npos, r.error().message());
    CHECK_MESSAGE(r.error().message().find("is not a time in milliseconds") != std::string::npos, r.error().message());
  }
  // errors name the file, the line and what is wrong
  auto refuse = [](const std::string& text, const std::string& expect) {
    auto r = sim::parse_series_trace(text, "s.csv", 1.0);
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.error().message().find(expect) != std::string::npos, r.error().message());
  };
  refuse("0,4\n10,4.5\n", "s.csv:2: '4.5' is not a count of live nodes");
  refuse("0,4\n-3,2\n", "s.csv:2: '-3' is neither an ISO 8601 time nor a number");
  refuse("0,4\n2021-13-01T00:00:00Z,2\n", "s.csv:2: '2021-13-01T00:00:00Z' is neither");
  refuse("0,4\n1,2,3\n", "s.csv:2: expected <time>,<live nodes>");
  refuse("time,count\nt,c\n", "s.csv:2: 't' is neither");  // one header only
  refuse("1000,4\n100,2\n", "s.csv:2: time goes back (-900 s");
  refuse("time,count\n", "s.csv: no lines");
  refuse("1627324920000,8\n", "s.csv:1: '1627324920000' is 1.63e+12 s, later than any clock (milliseconds since "
                              "1970? say time_unit = 'ms')");
  // as spreadsheets and scripts write them: a byte order mark, quotes, ';' or tabs, CRLF, a trailing
  // separator — each the same events as the plain file
  const std::string plain = "timestamp,count\n2021-07-26T18:42:00Z,8\n2021-07-26T18:45:00Z,6\n";
  auto expected = sim::parse_trace(plain, "p.csv", {});
  REQUIRE(expected.ok());
  for (const std::string& exported :
       {std::string("\xEF\xBB\xBF") + "2021-07-26T18:42:00Z,8\n2021-07-26T18:45:00Z,6\n",
        std::string("\"timestamp\",\"count\"\r\n\"2021-07-26T18:42:00Z\",\"8\"\r\n\"2021-07-26T18:45:00Z\",\"6\"\r\n"),
        std::string("timestamp;count\n2021-07-26T18:42:00Z;8\n2021-07-26T18:45:00Z;6\n"),
        std::string("2021-07-26T18:42:00Z\t8\n2021-07-26T18:45:00Z\t6\n"),
        std::string("2021-07-26T18:42:00Z,8,\n2021-07-26T18:45:00Z,6,\n"),
        std::string(",timestamp,count\n0,2021-07-26T18:42:00Z,8\n1,2021-07-26T18:45:00Z,6\n")}) {
    CAPTURE(exported);
    auto got = sim::parse_trace(exported, "e.csv", {});
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message()));
    REQUIRE(got->size() == expected->size());
    for (size_t i = 0; i < got->size(); ++i) {
      CHECK((*got)[i].ms == (*expected)[i].ms);
      CHECK((*got)[i].add == (*expected)[i].add);
    }
  }
  // a pandas export of another shape is still refused, naming the line as written
  auto deltas = sim::parse_trace(",timestamp,dt,count\n0,2021-07-26T18:42:00Z,2021-07-26 18:42:00,3\n", "d.csv", {});
  REQUIRE_FALSE(deltas.ok());
  CHECK(deltas.error().message().find("d.csv:2: cannot tell the trace's format from "
                                      "'0,2021-07-26T18:42:00Z,2021-07-26 18:42:00,3'") != std::string::npos);
  auto bom_events = sim::parse_trace("\xEF\xBB\xBF" "0,add,a\n10,add,b\n", "b.csv", {});
  REQUIRE_MESSAGE(bom_events.ok(), (bom_events.ok() ? "" : bom_events.error().message()));
  CHECK(bom_events->size() == 2);
  CHECK(sim::trace_time_unit("h").value() == 3600.0);
  CHECK(sim::trace_time_unit("d").error().message() == "time unit 'd': expected s, ms, min or h");
  // a drill replays a series trace; a time unit it does not know is named
  auto trace = temp_file("fleet.csv", "time,count\n0,8\n1,4\n2,8\n");
  auto drill = temp_file("f.lua", "replay_trace{ file = '" + trace + "', time_unit = 'min', time_scale = 0.01, max_nodes = 4 }\n");
  auto d = load_drill(drill, {});
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
  CHECK(d->initial_nodes == 4);
  REQUIRE(d->actions.size() == 2);
  CHECK(d->actions[0].kind == ActionKind::kill);
  CHECK(d->actions[0].count == 2);
  CHECK(d->actions[0].at_s == doctest::Approx(0.6));
  // a relative path is the drill file's, or the working directory's where nothing is beside it
  const std::string here = "sal-test-fleet-" + std::to_string(getpid()) + ".csv";
  std::ofstream(here) << "0,8\n1200,4\n";
  auto relative = temp_file("rel.lua", "replay_trace{ file = args.trace, max_nodes = 4 }\n");
  auto from_cwd = load_drill(relative, {{"trace", here}});
  std::remove(here.c_str());
  REQUIRE_MESSAGE(from_cwd.ok(), (from_cwd.ok() ? "" : from_cwd.error().message()));
  CHECK(from_cwd->actions.size() == 1);
  auto missing = load_drill(relative, {{"trace", here}});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find(sal::dir_name(relative) + "/" + here) != std::string::npos);
  // a trace of one instant says how many nodes, not for how long: refused unless the drill says
  // how long (in either order); one whose scaled span is under a second is refused with the unit hint
  auto instant = temp_file("one.csv", "0,8\n");
  auto bare = temp_file("one.lua", "replay_trace{ file = '" + instant + "', max_nodes = 4 }\n");
  auto no_span = load_drill(bare, {});
  REQUIRE_FALSE(no_span.ok());
  CHECK(no_span.error().message().find(bare + ":1: replay_trace: " + instant +
                                       " holds a single instant (4 local nodes at 0 s)") == 0);
  for (const std::string& text : {"drill{ duration_s = 5 }\nreplay_trace{ file = '" + instant + "', max_nodes = 4 }\n",
                                  "replay_trace{ file = '" + instant + "', max_nodes = 4 }\ndrill{ duration_s = 5 }\n"}) {
    auto timed = load_drill(temp_file("timed.lua", text), {});
    REQUIRE_MESSAGE(timed.ok(), (timed.ok() ? "" : timed.error().message()));
    CHECK(timed->duration_s == doctest::Approx(5));
    CHECK(timed->initial_nodes == 4);
    CHECK(timed->actions.empty());
  }
  auto hours_file = temp_file("hours_file.csv", "0.000,8\n0.030,4\n88.69,8\n");  // hours, read as seconds
  auto short_drill = load_drill(temp_file("h.lua", "replay_trace{ file = '" + hours_file + "', time_scale = 0.002 }\n"), {});
  REQUIRE_FALSE(short_drill.ok());
  CHECK(short_drill.error().message().find(hours_file + " spans 88.69 s of trace; at time_scale 0.002 that is 0.177 s of "
                                                   "drill, too short to train") != std::string::npos);
  CHECK(short_drill.error().message().find("(time_unit = 'min' or 'h'; now 1 s)") != std::string::npos);
  auto in_hours = load_drill(temp_file("h2.lua", "replay_trace{ file = '" + hours_file + "', time_unit = 'h', "
                                                 "time_scale = 0.002 }\n"), {});
  REQUIRE_MESSAGE(in_hours.ok(), (in_hours.ok() ? "" : in_hours.error().message()));
  CHECK(in_hours->duration_s == doctest::Approx(88.69 * 3600 * 0.002));
  // fit_s instead: any unit, the whole trace in 90 s; with time_scale too, refused
  auto fitted = load_drill(temp_file("h3.lua", "replay_trace{ file = '" + hours_file + "', fit_s = 90 }\n"), {});
  REQUIRE_MESSAGE(fitted.ok(), (fitted.ok() ? "" : fitted.error().message()));
  CHECK(fitted->duration_s == doctest::Approx(90));
  CHECK(fitted->trace_time_scale == doctest::Approx(90 / 88.69));
  auto both =
      load_drill(temp_file("h4.lua", "replay_trace{ file = '" + hours_file + "', fit_s = 90, time_scale = 1 }\n"), {});
  REQUIRE_FALSE(both.ok());
  CHECK(both.error().message().find("time_scale and fit_s both set the time scale: give one") != std::string::npos);
  CHECK(short_drill.error().message().find("or fit_s = T: the whole trace in T s") != std::string::npos);
  auto wrong = temp_file("u.lua", "replay_trace{ file = '" + trace + "', time_unit = 'days' }\n");
  auto refused = load_drill(wrong, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("replay_trace.time_unit: time unit 'days': expected s, ms, min or h") !=
        std::string::npos);
}

TEST_CASE("a broken trace names the file and the line") {
  auto check = [](const std::string& text, const std::string& expect) {
    auto r = read_bamboo_trace(temp_file("t.csv", text));
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.error().message().find(expect) != std::string::npos, r.error().message());
  };
  check("0,add,a\n10,join,b\n", "t.csv:2: event 'join' is neither add nor remove");
  check("0,add,a\nx,add,b\n", "t.csv:2: 'x' is not a time");
  check("10,add,a\n5,add,b\n", "t.csv:2: time 5 ms goes back");
  check("0,add\n", "t.csv:1: expected <ms>,add|remove,<node>");
  // node names that do not follow one trace's events (a mistyped name, two traces merged)
  check("0,add,a\n0,add,b\n10,remove,c\n", "t.csv:3: node 'c' is removed while it is not live (never added");
  check("0,add,a\n10,remove,a\n20,remove,a\n", "t.csv:3: node 'a' is removed while it is not live");
  check("0,add,a\n10,add,a\n", "t.csv:2: node 'a' is added while it is live");
  CHECK(read_bamboo_trace(temp_file("t.csv", "0,add,a\n10,remove,a\n20,add,a\n")).ok());  // back again: fine
}

TEST_CASE("the shipped drills load") {
  std::string dir = std::string(SAL_SOURCE_DIR) + "/scripts/drills/";
  for (const char* name : {"one_every_n.lua", "several_at_once.lua", "lose_expert.lua", "kill_controller.lua",
                           "partition.lua", "joins.lua"}) {
    auto d = load_drill(dir + name, {});
    CHECK_MESSAGE(d.ok(), name << ": " << (d.ok() ? "" : d.error().message()));
  }
  std::string trace = std::string(SAL_SOURCE_DIR) + "/../shared/data/bamboo-spot-traces/traces/p3-trace.csv";
  if (std::ifstream(trace).good()) {
    auto d = load_drill(dir + "p3_trace.lua", {{"trace", trace}});
    REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
    CHECK(d->initial_nodes >= 1u);
    CHECK(d->actions.size() > 20);
    CHECK(*d->duration_s == doctest::Approx(40920.0 * 0.002).epsilon(0.01));
  }
}

TEST_CASE("corrupt{}: a node, a unit by its name and the bits to flip, each checked, and a job must allow fault injection") {
  auto path = temp_file("c.lua", R"(
corrupt{ node = 2, unit = "layer1.expert3", bits = 4, step = 10 }
corrupt{ node = 1, unit = "embedding", bits = 1, at_s = 2 }
)");
  auto d = load_drill(path, {});
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message()));
  REQUIRE(d->actions.size() == 2);
  const Action& a = d->actions[0];
  CHECK(a.kind == ActionKind::corrupt);
  CHECK(a.node == 2u);
  REQUIRE(a.unit);
  CHECK(a.unit->name() == "layer1.expert3");
  CHECK(a.bits == 4);
  CHECK(a.step == 10u);
  CHECK(a.describe().find("corrupt node 2 after step 10: 4 bits of its layer1.expert3") == 0);
  CHECK(d->fault_injector() == &d->actions[0]);
  const sal::ModelShape two_layers{2, 8, 4, 8, 16};
  auto refused = check_for_job(*d, "jobs/prod.lua", false, two_layers);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("c.lua:2: corrupt{} is a fault injector, and the job jobs/prod.lua does not allow "
                                       "fault injection: faults.inject is false") != std::string::npos);
  CHECK(check_for_job(*d, "jobs/drill.lua", true, two_layers).ok());
  auto small = check_for_job(*d, "jobs/drill.lua", true, sal::ModelShape{1, 8, 4, 8, 16});
  REQUIRE_FALSE(small.ok());
  CHECK(small.error().message().find("corrupt.unit: the job jobs/drill.lua's model has no layer1.expert3") !=
        std::string::npos);
}

TEST_CASE("corrupt{}: a missing or wrong field is named") {
  auto refuse = [](const std::string& text, const std::string& expect) {
    auto d = parse_drill(text, "bad.lua", {});
    REQUIRE_FALSE(d.ok());
    CHECK_MESSAGE(d.error().message().find(expect) != std::string::npos, d.error().message());
  };
  refuse("corrupt{ unit = 'embedding', bits = 1, step = 1 }", "bad.lua:1: corrupt: node (the node whose copy is corrupted) is required");
  refuse("corrupt{ node = 'random', unit = 'embedding', bits = 1, step = 1 }", "bad.lua:1: corrupt.node: a node id");
  refuse("corrupt{ node = 1, bits = 1, step = 1 }", "bad.lua:1: corrupt: unit (");
  refuse("corrupt{ node = 1, unit = 'layer0.expertX', bits = 1, step = 1 }", "corrupt.unit: 'layer0.expertX' is no unit's name");
  refuse("corrupt{ node = 1, unit = 'embedding', step = 1 }", "corrupt: bits (how many bits");
  refuse("corrupt{ node = 1, unit = 'embedding', bits = 0, step = 1 }", "corrupt.bits: expected a number in [1, 4096]");
  refuse("corrupt{ node = 1, unit = 'embedding', bits = 1 }", "corrupt: give exactly one of step");
  refuse("corrupt{ node = 1, unit = 'embedding', bits = 1, step = 1, count = 2 }", "corrupt: unknown field 'count'");
}

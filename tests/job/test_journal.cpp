// test_journal.cpp — the controller's journal: every record round-trips, the fold gives what a
// restarted controller resumes from, a torn last line is ignored while any other bad line is an
// error naming the file and line, and compaction reads back to the same state; and the driver
// journals a commit, durably, before any worker hears of it.
#include <doctest/doctest.h>

#include "job/driver_harness.h"
#include "job/journal.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

namespace {

AppliedPlan applied(uint64_t version) {
  auto r = dealt_plan(2, version);
  r.plan.schedule = {2, 2, {{0, 1, 2}, {3, 4}}};
  r.plan.stacks.redundancy = 1, r.plan.stacks.hosts = {{0}}, r.plan.stacks.alive = {true}, r.plan.stacks.assignment = {{0}};
  return AppliedPlan{workers({3, 5}), r.plan, 40};
}

std::string lines(const std::vector<Record>& rs) {
  std::string out;
  for (const auto& r : rs) out += encode_record(r) + "\n";
  return out;
}

std::vector<Record> sample() {
  ckpt::Snapshot snap{40, "/run/snapshots/step-40", 13, 9000, 1.5, 3};
  return {rec::Job{"quickstart", "job.lua", "/jobs", "return {}", "tcp://127.0.0.1:5555", 600, 1700000000000},
          rec::EpochReached{4},
          rec::Node{3, "node0", "h"},
          rec::Node{5, "node1", "h"},
          rec::Policy{"placement", "mro", "return {}", 1},
          rec::Plan{applied(7)},
          rec::Commit{41, 4},
          rec::Snapshot{snap},
          rec::Commit{42, 4},
          rec::EpochReached{6},
          rec::Snapshot{{50, "/run/snapshots/step-50", 13, 9000, 1, 2}},
          rec::SnapshotDrop{"/run/snapshots/step-40"},
          rec::Commit{55, 6},
          rec::Rewind{50},
          rec::Policy{"placement", "spread", "return {2}", 2},
          rec::Drill{"/drills/kill_controller.lua", {{"at", "12"}}},
          rec::DrillClock{1700000004000},
          rec::DrillFired{0},
          rec::DrillFired{2},
          rec::Recovery{{"node 3 lost", "elastic", 12.5, 0.25, 43}},
          rec::Recovery{{"every copy lost", "restore", 20.0, 1.5, 44, "disk", 7}},
          rec::Lost{2},
          rec::Restores{1},
          rec::Aborted{2},
          rec::Patched{1},
          rec::Patched{2},
          rec::Lost{1}};
}

}  // namespace

TEST_CASE("journal records round-trip and fold into what a restart resumes from") {
  auto text = lines(sample());
  auto s = read_journal(text, "/run/journal.jsonl");
  REQUIRE(s.ok());
  CHECK(s->records == 27);
  REQUIRE(s->job);
  CHECK(s->job->mesh == "tcp://127.0.0.1:5555");
  CHECK(s->job->max_steps == 600);
  CHECK(s->epoch == 6);
  CHECK(s->nodes.size() == 2);
  CHECK(s->nodes.at(5).name == "node1");
  REQUIRE(s->plan);
  CHECK(s->plan->number() == 7);
  CHECK(s->plan->ranks == workers({3, 5}));
  CHECK(s->plan->from_step == 40);
  CHECK(s->plan->plan.layers[1].placement == applied(7).plan.layers[1].placement);
  CHECK(s->plan->plan.schedule.slots == applied(7).plan.schedule.slots);
  CHECK(s->plan->plan.stacks.alive == std::vector<bool>{true});
  CHECK(s->committed == 50);  // the rewind
  CHECK(s->commit_epoch == 6);
  REQUIRE(s->snapshots.size() == 1);
  CHECK(s->snapshots[0].step == 50);
  CHECK(s->policies.at("placement").name == "spread");
  REQUIRE(s->drill);
  CHECK(s->drill->drill.file == "/drills/kill_controller.lua");
  CHECK(s->drill->drill.args.at("at") == "12");
  CHECK(s->drill->clock_wall_ms == 1700000004000);
  CHECK(s->drill->fired == std::set<uint64_t>{0, 2});
  REQUIRE(s->recoveries.size() == 2);
  CHECK(s->recoveries[0].cause == "node 3 lost");
  CHECK(s->recoveries[0].seconds == 0.25);
  CHECK(s->recoveries[0].step == 43);
  CHECK(s->recoveries[0].source.empty());
  CHECK(s->recoveries[1].source == "disk");
  CHECK(s->recoveries[1].rerun == 7);
  CHECK(s->lost_steps == 3);
  CHECK(s->restores == 1);
  CHECK(s->aborted == 2);
  CHECK(s->patched == 3);  // the run's counts go on across a restart
  CHECK_FALSE(s->ended);
}

TEST_CASE("a torn last line is ignored, any other bad line names the file, the line and the rule") {
  auto text = lines(sample());
  auto torn = read_journal(text + "{\"r\":\"commit\",\"st", "j");
  REQUIRE(torn.ok());
  CHECK(torn->committed == 50);
  auto bad = read_journal(text + "{\"r\":\"commit\"}\n" + lines({rec::Commit{60, 6}}), "/run/journal.jsonl");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "/run/journal.jsonl:28: commit.step: missing");
  auto unknown = read_journal(text + "{\"r\":\"launch\"}\n", "j");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message() == "j:28: r: 'launch' is not a journal record");
  auto args = read_journal(lines({rec::Job{}}) + "{\"r\":\"drill\",\"file\":\"d.lua\",\"args\":{\"at\":3}}\n", "j");
  REQUIRE_FALSE(args.ok());
  CHECK(args.error().message() == "j:2: drill.args.at: expected a string");
  auto wrong = read_journal(lines({rec::Job{}}) + "{\"r\":\"plan\",\"plan\":{\"layers\":[{\"replicas\":[1]}]},\"ranks\":[[1,0],[2,0]],\"from_step\":0}\n", "j");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message().find("j:2: plan.ranks: 2 ranks for 0 positions") == 0);
  CHECK_FALSE(read_journal("", "j").ok());  // no job record
}

TEST_CASE("compaction reads back to the same state, in fewer records") {
  auto s = read_journal(lines(sample()), "j");
  REQUIRE(s.ok());
  auto c = compact(*s);
  CHECK(c.size() < s->records);
  auto back = read_journal(lines(c), "j");
  REQUIRE(back.ok());
  CHECK(back->committed == s->committed);
  CHECK(back->commit_epoch == s->commit_epoch);
  CHECK(back->epoch == s->epoch);
  CHECK(back->plan->ranks == s->plan->ranks);
  CHECK(back->plan->plan.layers[0].placement == s->plan->plan.layers[0].placement);
  CHECK(back->snapshots.size() == 1);
  CHECK(back->policies.at("placement").generation == 2);
  CHECK(back->nodes.size() == 2);
  REQUIRE(back->drill);
  CHECK(back->drill->fired == s->drill->fired);
  CHECK(back->drill->clock_wall_ms == s->drill->clock_wall_ms);
  CHECK(back->drill->drill.args == s->drill->drill.args);
  CHECK(back->recoveries.size() == 2);
  CHECK(back->lost_steps == 3);
  CHECK(back->restores == 1);
  CHECK(back->aborted == 2);
  CHECK(back->patched == 3);
}

TEST_CASE("the driver journals a commit, durably, before any worker hears of it, and the job's end") {
  auto cfg = small_job();
  cfg.max_steps = 1;
  Harness h(cfg);
  h.start(workers({0, 1}));
  bool plan_journaled = false;
  for (const auto& a : h.history)
    if (auto* j = std::get_if<act::Journal>(&a)) plan_journaled = plan_journaled || std::holds_alternative<rec::Plan>(j->record);
  CHECK(plan_journaled);
  h.vote({0, 0}, 0);
  h.vote({1, 0}, 0);
  size_t journal_at = h.out.size(), commit_at = h.out.size();
  for (size_t i = 0; i < h.out.size(); ++i) {
    if (auto* j = std::get_if<act::Journal>(&h.out[i]); j && std::holds_alternative<rec::Commit>(j->record)) {
      journal_at = std::min(journal_at, i);
      CHECK(j->sync);
      CHECK(std::get<rec::Commit>(j->record).step == 1);
    }
    if (auto* s = std::get_if<act::Send>(&h.out[i]); s && std::holds_alternative<wire::StepCommit>(s->msg))
      commit_at = std::min(commit_at, i);
  }
  CHECK(journal_at < commit_at);
  CHECK(commit_at < h.out.size());
  h.timer(Timer::soon);
  h.on(in::Saved{wire::SaveDone{0, 0, 1, true, "", 7, false, 0, 0, 0}});
  h.on(in::Saved{wire::SaveDone{1, 0, 1, true, "", 6, false, 0, 0, 0}});
  bool ended = false;
  for (const auto& j : h.all<act::Journal>()) ended = ended || std::holds_alternative<rec::End>(j.record);
  CHECK(ended);
}

// test_corpus.cpp — the decoder's fuzz corpus as unit tests: every file in tests/wire/corpus is fed
// to open() and then to every decoder; none may crash, and a random mutation sweep over valid
// messages (fixed seed) must only ever produce errors or valid messages.
#include <doctest/doctest.h>

#include <dirent.h>

#include <fstream>
#include <random>
#include <sstream>

#include "wire/codec.h"

using namespace sal::wire;

namespace {

// Corpus file format: the header frame, then the body (split at byte 6).
Parts parts_of(const std::string& bytes) {
  Parts p;
  p.emplace_back(bytes.data(), std::min<size_t>(bytes.size(), kHeaderBytes));
  if (bytes.size() > kHeaderBytes) p.emplace_back(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes);
  return p;
}

// Runs every decoder over an envelope; returns how many accepted it (0 or 1).
int decode_all(const Envelope& e) {
  int ok = 0;
  ok += decode<RegisterNode>(e).ok();
  ok += decode<Welcome>(e).ok();
  ok += decode<Heartbeat>(e).ok();
  ok += decode<Ping>(e).ok();
  ok += decode<WorkerEvent>(e).ok();
  ok += decode<Goodbye>(e).ok();
  ok += decode<Command>(e).ok();
  ok += decode<StepBegin>(e).ok();
  ok += decode<StepVote>(e).ok();
  ok += decode<StepCommit>(e).ok();
  ok += decode<StepAbort>(e).ok();
  ok += decode<ErrorReply>(e).ok();
  ok += decode<WorkerHello>(e).ok();
  ok += decode<WorkerStatus>(e).ok();
  ok += decode<ReplHello>(e).ok();
  ok += decode<ReplWelcome>(e).ok();
  ok += decode<ReplEval>(e).ok();
  ok += decode<ReplResult>(e).ok();
  ok += decode<ReplComplete>(e).ok();
  ok += decode<ReplCompletions>(e).ok();
  ok += decode<ReplBye>(e).ok();
  ok += decode<PlanUpdate>(e).ok();
  ok += decode<SaveDone>(e).ok();
  return ok;
}

// A plan update with every part of the typed plan filled (nested lists, a bool list).
PlanUpdate plan_update() {
  PlanUpdate u;
  u.epoch = 3, u.step = 40, u.ranks = {{0, 0}, {1, 0}};
  u.plan.version = 7, u.plan.nodes = 2, u.plan.slots = 2, u.plan.experts = 3, u.plan.floor = 1;
  u.plan.layers = {{{2, 1, 1}, {{0, 1}, {0, 2}}}};
  u.plan.schedule = {2, 2, {{0, 1}, {2}}};
  u.plan.stacks.redundancy = 1, u.plan.stacks.hosts = {{0}}, u.plan.stacks.alive = {true}, u.plan.stacks.assignment = {{0}};
  u.transfers = {{3, 0, 2, 0, 1}};
  u.store = "tcp://127.0.0.1:5000";
  return u;
}

std::string flatten(const Parts& p) {
  std::string s;
  for (auto& m : p) s.append(static_cast<const char*>(m.data()), m.size());
  return s;
}

}  // namespace

TEST_CASE("every corpus file decodes to an error or one valid message") {
  std::string dir = std::string(SAL_SOURCE_DIR) + "/tests/wire/corpus";
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  int files = 0;
  while (dirent* ent = readdir(d)) {
    if (ent->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + ent->d_name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto env = open(parts_of(ss.str()));
    if (env.ok()) CHECK(decode_all(*env) <= 1);
    ++files;
  }
  closedir(d);
  CHECK(files >= 10);
}

TEST_CASE("random mutations of valid messages never crash the decoder") {
  std::vector<std::string> seeds = {
      flatten(encode(Heartbeat{3, 9, {{0, "cpu:0", 77, WorkerState::ready}}})),
      flatten(encode(RegisterNode{"n", "h", 1, {"cpu:0", "cpu:1"}, "b"})),
      flatten(encode(ReplEval{1, "return 1", ValueFormat::text})),
      flatten(encode(WorkerEvent{1, 0, WorkerEventKind::exited, 5, 0, 9, "x"})),
      flatten(encode(plan_update())),
  };
  std::mt19937 rng(12345);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string m = seeds[size_t(i) % seeds.size()];
    int edits = 1 + int(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t pos = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[pos] = char(rng()); break;
        case 1: m.erase(pos, 1 + rng() % 3); break;
        default: m.insert(pos, 1, char(rng())); break;
      }
      if (m.empty()) m = "x";
    }
    auto env = open(parts_of(m));
    if (!env.ok()) {
      ++rejected;
      continue;
    }
    int n = decode_all(*env);
    CHECK(n <= 1);
    (n ? accepted : rejected)++;
  }
  CHECK(rejected > 0);
  CHECK(accepted + rejected == 20000);
}

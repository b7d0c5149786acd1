// journal.h — what a restarted controller needs to resume a job without losing or repeating a
// committed step, as records appended to <run>/journal.jsonl (one JSON object a line):
//
//   {"r":"job", name, file, dir, text, mesh, max_steps, started_wall_ms}   the job, the mesh endpoint
//                                   it serves, and when it started
//   {"r":"epoch", epoch}            the membership epoch reached (a restart continues above it)
//   {"r":"node", id, name, host}    a node joined (a returning agent keeps its id)
//   {"r":"plan", plan, ranks, from_step}   a plan put in force (the typed plan, rank order)
//   {"r":"commit", step}            `step` steps are committed — written and fsynced before any
//                                   worker is told, so no worker can be ahead of the journal
//   {"r":"rewind", to}              a restore set the committed steps to `to`: back, or forward to a
//                                   snapshot written before an earlier rollback (fsynced)
//   {"r":"snapshot", step, dir, units, bytes} / {"r":"snapshot_drop", dir}   the dense snapshots
//   {"r":"policy", slot, name, generation, source}   the generation in force in a slot
//   {"r":"drill", file, args} / {"r":"drill_clock", wall_ms} / {"r":"drill_fired", index}   a drill
//                                   running on the job, when its clock started, and each action
//                                   fired (fsynced), so a restarted controller goes on with it
//   {"r":"recovery", cause, kind, at_s, seconds, step[, source, rerun]} / {"r":"lost", steps} /
//   {"r":"restores", n} / {"r":"aborted", n} / {"r":"corrupt", n}
//                                   the run's record (mesh/run_record.h), so a resumed controller's
//                                   summary and drill expectations count what came before it
//   {"r":"end", why}                the job is over: there is nothing to resume
//
// Reading folds the records into a JournalState; a torn last line (a crash in the middle of a
// write) is ignored, any other bad line is an error naming the file and the line. The journal is
// compacted by rewriting the state as records (compact()), so it stays bounded. Pure: the
// controller (mesh/journal_file.h) does the file I/O.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ckpt/book.h"
#include "core/ids.h"
#include "core/result.h"
#include "job/measurements.h"
#include "job/plan_switch.h"

namespace sal::job {

namespace rec {

struct Job {
  std::string name, file, dir, text;
  std::string mesh;       // the mesh endpoint the agents connect to
  int64_t max_steps = 0;
  int64_t started_wall_ms = 0;  // when the first controller started (a restart keeps the run's clock)
};
struct EpochReached { Epoch epoch = 0; };
struct Node {
  NodeId id = kNoNode;
  std::string name, host;
};
struct Plan {
  AppliedPlan applied;
};
struct Commit {
  uint64_t step = 0;  // steps committed
  Epoch epoch = 0;    // the epoch the last of them began in (a worker checks a late commit against it)
};
struct Rewind { uint64_t to = 0; };
struct Snapshot { ckpt::Snapshot snapshot; };
struct SnapshotDrop { std::string dir; };
struct Policy {
  std::string slot, name, source;
  uint64_t generation = 0;
};
struct End { std::string why; };
struct Drill {
  std::string file;
  std::map<std::string, std::string> args;
};
struct DrillClock { int64_t wall_ms = 0; };
struct DrillFired { uint64_t index = 0; };
struct Recovery { RecoveryRecord record; };
struct Lost { uint64_t steps = 0; };
struct Restores { uint64_t count = 0; };
struct Aborted { uint64_t count = 0; };  // steps aborted (each adds; the Prometheus counters go on from them)
struct Patched { uint64_t count = 0; };  // steps patched (SPARe; each adds, like Aborted)
struct Corrupt { uint64_t copies = 0; };  // copies whose digests disagreed with their unit's majority

}  // namespace rec

// A drill's progress as the journal has it.
struct DrillProgress {
  rec::Drill drill;
  std::optional<int64_t> clock_wall_ms;  // when its clock started (wall time)
  std::set<uint64_t> fired;              // the actions that ran
};

using Record = std::variant<rec::Job, rec::EpochReached, rec::Node, rec::Plan, rec::Commit, rec::Rewind,
                            rec::Snapshot, rec::SnapshotDrop, rec::Policy, rec::End, rec::Drill, rec::DrillClock,
                            rec::DrillFired, rec::Recovery, rec::Lost, rec::Restores, rec::Aborted,
                            rec::Patched, rec::Corrupt>;

std::string encode_record(const Record& r);  // one line, no newline
Result<Record> decode_record(const std::string& line);

// Everything the journal says, folded.
struct JournalState {
  std::optional<rec::Job> job;
  Epoch epoch = 0;
  std::map<NodeId, rec::Node> nodes;
  std::optional<AppliedPlan> plan;
  uint64_t committed = 0;
  Epoch commit_epoch = 0;  // the epoch the last committed step began in
  std::vector<ckpt::Snapshot> snapshots;      // complete, oldest first
  std::map<std::string, rec::Policy> policies;  // by slot
  std::optional<std::string> ended;           // why the job is over
  std::optional<DrillProgress> drill;
  std::vector<RecoveryRecord> recoveries;     // the run's record so far
  uint64_t lost_steps = 0;
  uint64_t restores = 0;
  uint64_t aborted = 0;                       // steps aborted so far
  uint64_t patched = 0;                       // steps patched so far
  uint64_t corrupt_copies = 0;
  size_t records = 0;                         // lines read
  double read_ms = 0;                         // reading and folding them (set by whoever read the file)
  void apply(const Record& r);
};

// Reads a journal's lines (the file's text); `path` names it in errors.
Result<JournalState> read_journal(const std::string& text, const std::string& path);
// The state as the fewest records that read back to it.
std::vector<Record> compact(const JournalState& s);

}  // namespace sal::job

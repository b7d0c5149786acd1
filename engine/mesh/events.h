// events.h — the controller's event log: every membership change, liveness verdict, step abort
// and operator action, with its cause. Kept in a bounded ring for job.events() and appended to
// events.csv when a run directory is set. An event identical to the one just before it (kind,
// node, detail) is coalesced into it with a count; the count is written as one more row when a
// different event follows (or the log closes). An event about a node carries the node's name (its
// agent's --name, which also names its log file) beside its id, so that one name matches a node
// across job.events(), job.nodes(), events.csv, the report and the logs. Times are CLOCK_MONOTONIC (comparable across processes
// on one machine, which is how detection latency is measured) and wall clock.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "core/ids.h"

namespace sal::mesh {

struct Event {
  uint64_t seq = 0;
  int64_t mono_ns = 0;
  int64_t wall_ms = 0;
  std::string kind;     // node_joined, node_suspect, node_alive, node_dead, node_left, ...
  NodeId node = kNoNode;
  std::string name;     // the node's name; "" without a node
  Epoch epoch = 0;
  std::string detail;   // the cause, in words
  uint64_t repeats = 0; // the same event again right after, this many times (coalesced)
  int64_t last_mono_ns = 0;  // when it last repeated
  bool repeats_written = false;
};

class EventLog {
 public:
  static constexpr size_t kCapacity = 10000;

  ~EventLog();
  // Writes to <path> as CSV, replacing what a run before left there; with `append` (a controller that
  // resumed the job from its journal) continuing it (the header written if the file is new).
  void open_csv(const std::string& path, bool append = false);
  // How many events of each kind an events.csv holds (a resumed run's, before this controller's).
  static std::map<std::string, uint64_t> count_kinds(const std::string& path);
  const Event& add(std::string kind, NodeId node, Epoch epoch, std::string detail);
  const std::deque<Event>& all() const { return events_; }
  // Told the kind of every event added, repeats included (the metrics endpoint counts them).
  std::function<void(const std::string& kind)> on_add;
  // The name of a node by its id (the membership sets it), asked when an event is added.
  std::function<std::string(NodeId)> name_of;
  uint64_t count() const { return next_seq_; }

 private:
  void write_row(const Event& e, const std::string& detail);
  void flush_repeats();

  std::deque<Event> events_;
  uint64_t next_seq_ = 0;
  FILE* csv_ = nullptr;
};

}  // namespace sal::mesh

// journal.cpp — see journal.h.
#include "job/journal.h"

#include <algorithm>
#include <optional>

#include "core/json_text.h"
#include "core/overloaded.h"

namespace sal::job {
namespace {

using json = nlohmann::ordered_json;

json ranks_json(const std::vector<Participant>& ranks) {
  json out = json::array();
  for (const auto& r : ranks) out.push_back({r.node, r.index});
  return out;
}

json snapshot_json(const ckpt::Snapshot& s) {
  return {{"r", "snapshot"}, {"step", s.step}, {"dir", s.dir}, {"units", s.units}, {"bytes", s.bytes}};
}

// Checked field access: every error names the record's kind and the field.
// Reads a record's fields; the first one missing or of the wrong type is kept as the record's
// error (later reads give defaults), so a decoder reads every field, then checks once.
struct Reader {
  const nlohmann::json& j;
  std::string kind;
  mutable std::optional<Error> error;

  const nlohmann::json* field(const char* key) const {
    static const nlohmann::json kNull;
    if (j.contains(key)) return &j[key];
    if (!error) error = fail(kind, ".", key, ": missing");
    return &kNull;
  }
  uint64_t u64(const char* key) const {
    const auto* f = field(key);
    if (f->is_number_unsigned()) return f->get<uint64_t>();
    if (!error) error = fail(kind, ".", key, ": expected a non-negative integer");
    return 0;
  }
  double num(const char* key) const {
    const auto* f = field(key);
    if (f->is_number()) return f->get<double>();
    if (!error) error = fail(kind, ".", key, ": expected a number");
    return 0;
  }
  std::string str(const char* key) const {
    const auto* f = field(key);
    if (f->is_string()) return f->get<std::string>();
    if (!error) error = fail(kind, ".", key, ": expected a string");
    return {};
  }
};

Result<std::vector<Participant>> ranks_from(const nlohmann::json& j) {
  if (!j.is_array()) return fail("plan.ranks: expected [[node, index], ...]");
  std::vector<Participant> out;
  for (const auto& r : j) {
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_unsigned() || !r[1].is_number_unsigned())
      return fail("plan.ranks: expected [[node, index], ...]");
    out.push_back({r[0].get<NodeId>(), r[1].get<uint32_t>()});
  }
  return out;
}

Result<Record> decode_plan(const Reader& r) {
  const auto* plan_j = r.field("plan");
  const auto* ranks_j = r.field("ranks");
  uint64_t from = r.u64("from_step");
  if (r.error) return *r.error;
  auto plan = plan::plan_from_json(*plan_j);
  if (!plan) return plan.error().with_context("plan.plan");
  auto ranks = ranks_from(*ranks_j);
  if (!ranks) return ranks.error();
  if (ranks->size() != plan->nodes) return fail("plan.ranks: ", ranks->size(), " ranks for ", plan->nodes, " positions");
  return Record(rec::Plan{AppliedPlan{std::move(*ranks), std::move(*plan), from}});
}

Result<Record> decode_job(const Reader& r) {
  rec::Job job{r.str("name"), r.str("file"), r.str("dir"), r.str("text"), r.str("mesh"),
               int64_t(r.u64("max_steps")), int64_t(r.u64("started_wall_ms"))};
  if (r.error) return *r.error;
  return Record(job);
}

Result<Record> decode_snapshot(const Reader& r) {
  ckpt::Snapshot s;
  s.step = r.u64("step"), s.dir = r.str("dir"), s.units = uint32_t(r.u64("units")), s.bytes = r.u64("bytes");
  if (r.error) return *r.error;
  return Record(rec::Snapshot{s});
}

Result<Record> decode_policy(const Reader& r) {
  rec::Policy p{r.str("slot"), r.str("name"), r.str("source"), r.u64("generation")};
  if (r.error) return *r.error;
  return Record(p);
}

Result<Record> decode_node(const Reader& r) {
  rec::Node n{NodeId(r.u64("id")), r.str("name"), r.str("host")};
  if (r.error) return *r.error;
  return Record(n);
}

Result<Record> decode_commit(const Reader& r) {
  rec::Commit c{r.u64("step"), r.u64("epoch")};
  if (r.error) return *r.error;
  return Record(c);
}

Result<Record> decode_drill(const Reader& r) {
  rec::Drill d{r.str("file"), {}};
  const auto* args = r.field("args");
  if (r.error) return *r.error;
  if (!args->is_object()) return fail("drill.args: expected an object of strings");
  for (const auto& [k, v] : args->items()) {
    if (!v.is_string()) return fail("drill.args.", k, ": expected a string");
    d.args[k] = v.get<std::string>();
  }
  return Record(d);
}

Result<Record> decode_recovery(const Reader& r) {
  RecoveryRecord x{r.str("cause"), r.str("kind"), r.num("at_s"), r.num("seconds"), r.u64("step")};
  if (r.j.contains("source")) x.source = r.str("source"), x.rerun = r.u64("rerun");  // a restore
  if (r.j.contains("capacity_wait_s")) x.capacity_wait_s = r.num("capacity_wait_s");
  if (r.j.contains("interrupted_s")) x.interrupted_s = r.num("interrupted_s");
  if (r.error) return *r.error;
  return Record(rec::Recovery{x});
}

Result<Record> decode_drill_clock(const Reader& r) {
  rec::DrillClock c{int64_t(r.u64("wall_ms"))};
  if (r.error) return *r.error;
  return Record(c);
}

template <class R>
Result<Record> one_number(const Reader& r, const char* key) {
  R rec{r.u64(key)};
  if (r.error) return *r.error;
  return Record(rec);
}

template <class R>
Result<Record> one_string(const Reader& r, const char* key) {
  R rec{r.str(key)};
  if (r.error) return *r.error;
  return Record(rec);
}

}  // namespace

std::string encode_record(const Record& r) {
  json j = std::visit(
      Overloaded{
          [](const rec::Job& x) -> json {
            return {{"r", "job"}, {"name", x.name}, {"file", x.file}, {"dir", x.dir}, {"text", x.text},
                    {"mesh", x.mesh}, {"max_steps", x.max_steps}, {"started_wall_ms", x.started_wall_ms}};
          },
          [](const rec::EpochReached& x) -> json { return {{"r", "epoch"}, {"epoch", x.epoch}}; },
          [](const rec::Node& x) -> json { return {{"r", "node"}, {"id", x.id}, {"name", x.name}, {"host", x.host}}; },
          [](const rec::Plan& x) -> json {
            return {{"r", "plan"}, {"plan", plan::plan_to_json(x.applied.plan)}, {"ranks", ranks_json(x.applied.ranks)},
                    {"from_step", x.applied.from_step}};
          },
          [](const rec::Commit& x) -> json { return {{"r", "commit"}, {"step", x.step}, {"epoch", x.epoch}}; },
          [](const rec::Rewind& x) -> json { return {{"r", "rewind"}, {"to", x.to}}; },
          [](const rec::Snapshot& x) -> json { return snapshot_json(x.snapshot); },
          [](const rec::SnapshotDrop& x) -> json { return {{"r", "snapshot_drop"}, {"dir", x.dir}}; },
          [](const rec::Policy& x) -> json {
            return {{"r", "policy"}, {"slot", x.slot}, {"name", x.name}, {"generation", x.generation}, {"source", x.source}};
          },
          [](const rec::End& x) -> json { return {{"r", "end"}, {"why", x.why}}; },
          [](const rec::Drill& x) -> json { return {{"r", "drill"}, {"file", x.file}, {"args", x.args}}; },
          [](const rec::DrillClock& x) -> json { return {{"r", "drill_clock"}, {"wall_ms", x.wall_ms}}; },
          [](const rec::DrillFired& x) -> json { return {{"r", "drill_fired"}, {"index", x.index}}; },
          [](const rec::Recovery& x) -> json {
            json j{{"r", "recovery"}, {"cause", x.record.cause}, {"kind", x.record.kind}, {"at_s", x.record.at_s},
                   {"seconds", x.record.seconds}, {"step", x.record.step}};
            if (!x.record.source.empty()) j["source"] = x.record.source, j["rerun"] = x.record.rerun;
            if (x.record.capacity_wait_s > 0) j["capacity_wait_s"] = x.record.capacity_wait_s;
            if (x.record.interrupted_s > 0) j["interrupted_s"] = x.record.interrupted_s;
            return j;
          },
          [](const rec::Lost& x) -> json { return {{"r", "lost"}, {"steps", x.steps}}; },
          [](const rec::Restores& x) -> json { return {{"r", "restores"}, {"n", x.count}}; },
          [](const rec::Aborted& x) -> json { return {{"r", "aborted"}, {"n", x.count}}; },
          [](const rec::Patched& x) -> json { return {{"r", "patched"}, {"n", x.count}}; },
          [](const rec::Corrupt& x) -> json { return {{"r", "corrupt"}, {"n", x.copies}}; },
      },
      r);
  return json_text(j);
}

Result<Record> decode_record(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  if (!j.contains("r") || !j["r"].is_string()) return fail("r: missing (the record's kind)");
  std::string kind = j["r"];
  Reader r{j, kind};
  if (kind == "job") return decode_job(r);
  if (kind == "epoch") return one_number<rec::EpochReached>(r, "epoch");
  if (kind == "node") return decode_node(r);
  if (kind == "plan") return decode_plan(r);
  if (kind == "commit") return decode_commit(r);
  if (kind == "rewind") return one_number<rec::Rewind>(r, "to");
  if (kind == "snapshot") return decode_snapshot(r);
  if (kind == "snapshot_drop") return one_string<rec::SnapshotDrop>(r, "dir");
  if (kind == "policy") return decode_policy(r);
  if (kind == "end") return one_string<rec::End>(r, "why");
  if (kind == "drill") return decode_drill(r);
  if (kind == "drill_clock") return decode_drill_clock(r);
  if (kind == "drill_fired") return one_number<rec::DrillFired>(r, "index");
  if (kind == "recovery") return decode_recovery(r);
  if (kind == "lost") return one_number<rec::Lost>(r, "steps");
  if (kind == "restores") return one_number<rec::Restores>(r, "n");
  if (kind == "aborted") return one_number<rec::Aborted>(r, "n");
  if (kind == "patched") return one_number<rec::Patched>(r, "n");
  if (kind == "corrupt") return one_number<rec::Corrupt>(r, "n");
  return fail("r: '", kind, "' is not a journal record");
}

void JournalState::apply(const Record& r) {
  ++records;
  std::visit(Overloaded{
                 [&](const rec::Job& x) { job = x; },
                 [&](const rec::EpochReached& x) { epoch = std::max(epoch, x.epoch); },
                 [&](const rec::Node& x) { nodes[x.id] = x; },
                 [&](const rec::Plan& x) { plan = x.applied; },
                 [&](const rec::Commit& x) {
                   committed = x.step;
                   commit_epoch = x.epoch;
                 },
                 [&](const rec::Rewind& x) { committed = x.to; },
                 [&](const rec::Snapshot& x) {
                   std::erase_if(snapshots, [&](const ckpt::Snapshot& s) { return s.dir == x.snapshot.dir; });
                   snapshots.push_back(x.snapshot);
                 },
                 [&](const rec::SnapshotDrop& x) {
                   std::erase_if(snapshots, [&](const ckpt::Snapshot& s) { return s.dir == x.dir; });
                 },
                 [&](const rec::Policy& x) { policies[x.slot] = x; },
                 [&](const rec::End& x) { ended = x.why; },
                 [&](const rec::Drill& x) { drill = DrillProgress{x, std::nullopt, {}}; },
                 [&](const rec::DrillClock& x) {
                   if (drill) drill->clock_wall_ms = x.wall_ms;
                 },
                 [&](const rec::DrillFired& x) {
                   if (drill) drill->fired.insert(x.index);
                 },
                 [&](const rec::Recovery& x) { recoveries.push_back(x.record); },
                 [&](const rec::Lost& x) { lost_steps += x.steps; },
                 [&](const rec::Restores& x) { restores += x.count; },
                 [&](const rec::Aborted& x) { aborted += x.count; },
                 [&](const rec::Patched& x) { patched += x.count; },
                 [&](const rec::Corrupt& x) { corrupt_copies += x.copies; },
             },
             r);
}

Result<JournalState> read_journal(const std::string& text, const std::string& path) {
  JournalState s;
  size_t line_no = 0, at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    bool torn = end == std::string::npos;  // the last write did not finish
    std::string line = text.substr(at, torn ? std::string::npos : end - at);
    at = torn ? text.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    auto r = decode_record(line);
    if (!r) {
      if (torn) break;
      return fail(path, ":", line_no, ": ", r.error().message());
    }
    s.apply(*r);
  }
  if (!s.job) return fail(path, ": no job record (not a Salamander journal, or empty)");
  return s;
}

std::vector<Record> compact(const JournalState& s) {
  std::vector<Record> out;
  if (s.job) out.push_back(*s.job);
  out.push_back(rec::EpochReached{s.epoch});
  for (const auto& [id, n] : s.nodes) out.push_back(n);
  for (const auto& [slot, p] : s.policies) out.push_back(p);
  if (s.plan) out.push_back(rec::Plan{*s.plan});
  for (const auto& snap : s.snapshots) out.push_back(rec::Snapshot{snap});
  out.push_back(rec::Commit{s.committed, s.commit_epoch});
  if (s.drill) {
    out.push_back(s.drill->drill);
    if (s.drill->clock_wall_ms) out.push_back(rec::DrillClock{*s.drill->clock_wall_ms});
    for (uint64_t i : s.drill->fired) out.push_back(rec::DrillFired{i});
  }
  for (const auto& r : s.recoveries) out.push_back(rec::Recovery{r});
  if (s.lost_steps) out.push_back(rec::Lost{s.lost_steps});
  if (s.restores) out.push_back(rec::Restores{s.restores});
  if (s.aborted) out.push_back(rec::Aborted{s.aborted});
  if (s.patched) out.push_back(rec::Patched{s.patched});
  if (s.corrupt_copies) out.push_back(rec::Corrupt{s.corrupt_copies});
  if (s.ended) out.push_back(rec::End{*s.ended});
  return out;
}

}  // namespace sal::job

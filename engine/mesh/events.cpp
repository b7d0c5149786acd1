// events.cpp — see events.h.
#include "mesh/events.h"

#include <spdlog/spdlog.h>

#include <fstream>

#include "core/clock.h"
#include "core/strings.h"

namespace sal::mesh {

EventLog::~EventLog() {
  if (!events_.empty()) flush_repeats();
  if (csv_) std::fclose(csv_);
}

void EventLog::open_csv(const std::string& path, bool append) {
  csv_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!csv_) {
    spdlog::warn("cannot open {} for events", path);
    return;
  }
  if (std::ftell(csv_) == 0) std::fputs("seq,mono_ns,wall_ms,kind,node,name,epoch,detail\n", csv_);
}

std::map<std::string, uint64_t> EventLog::count_kinds(const std::string& path) {
  std::map<std::string, uint64_t> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // seq,mono_ns,wall_ms,kind,...: the kind is the fourth field, never quoted
    size_t at = 0;
    for (int comma = 0; comma < 3 && at != std::string::npos; ++comma) at = line.find(',', at) + 1;
    const size_t end = at == 0 ? std::string::npos : line.find(',', at);
    if (at != 0 && end != std::string::npos && end > at) ++out[line.substr(at, end - at)];
  }
  return out;
}

void EventLog::write_row(const Event& e, const std::string& detail) {
  if (!csv_) return;
  std::fprintf(csv_, "%llu,%lld,%lld,%s,%s,%s,%llu,%s\n", (unsigned long long)e.seq, (long long)e.mono_ns,
               (long long)e.wall_ms, e.kind.c_str(), e.node == kNoNode ? "" : std::to_string(e.node).c_str(),
               csv_field(e.name).c_str(), (unsigned long long)e.epoch, csv_field(detail).c_str());
  std::fflush(csv_);
}

// The repeats of the last event, as one row stamped with the last of them.
void EventLog::flush_repeats() {
  Event& last = events_.back();
  if (last.repeats == 0 || last.repeats_written) return;
  Event row = last;
  row.mono_ns = last.last_mono_ns;
  write_row(row, last.detail + " (repeated " + std::to_string(last.repeats) + " more times)");
  last.repeats_written = true;
}

const Event& EventLog::add(std::string kind, NodeId node, Epoch epoch, std::string detail) {
  if (on_add) on_add(kind);
  if (!events_.empty()) {
    Event& last = events_.back();
    if (last.kind == kind && last.node == node && last.detail == detail) {
      ++last.repeats;
      last.last_mono_ns = mono_ns();
      return last;
    }
    flush_repeats();
  }
  std::string name = node != kNoNode && name_of ? name_of(node) : "";
  Event e{next_seq_++, mono_ns(), wall_ms(), std::move(kind), node, std::move(name), epoch, std::move(detail)};
  write_row(e, e.detail);
  events_.push_back(std::move(e));
  if (events_.size() > kCapacity) events_.pop_front();
  return events_.back();
}

}  // namespace sal::mesh

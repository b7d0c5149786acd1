// events.cpp — see events.h.
#include "mesh/events.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/strings.h"

namespace sal::mesh {

EventLog::~EventLog() {
  if (csv_) std::fclose(csv_);
}

void EventLog::open_csv(const std::string& path) {
  csv_ = std::fopen(path.c_str(), "a");
  if (!csv_) {
    spdlog::warn("cannot open {} for events", path);
    return;
  }
  if (std::ftell(csv_) == 0) std::fputs("seq,mono_ns,wall_ms,kind,node,epoch,detail\n", csv_);
}

const Event& EventLog::add(std::string kind, NodeId node, Epoch epoch, std::string detail) {
  Event e{next_seq_++, mono_ns(), wall_ms(), std::move(kind), node, epoch, std::move(detail)};
  if (csv_) {
    std::fprintf(csv_, "%llu,%lld,%lld,%s,%s,%llu,%s\n", (unsigned long long)e.seq,
                 (long long)e.mono_ns, (long long)e.wall_ms, e.kind.c_str(),
                 e.node == kNoNode ? "" : std::to_string(e.node).c_str(),
                 (unsigned long long)e.epoch, csv_field(e.detail).c_str());
    std::fflush(csv_);
  }
  events_.push_back(std::move(e));
  if (events_.size() > kCapacity) events_.pop_front();
  return events_.back();
}

}  // namespace sal::mesh

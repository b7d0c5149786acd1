// snapshots.cpp — see snapshots.h.
#include "mesh/snapshots.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "core/paths.h"

namespace sal::mesh {

SnapshotBook::SnapshotBook(std::string root, uint32_t model_units, size_t keep)
    : root_(std::move(root)), model_units_(model_units), keep_(std::max<size_t>(keep, 1)) {}

std::string SnapshotBook::begin(uint64_t step, const std::vector<Participant>& ranks) {
  Pending p;
  p.s.step = step;
  p.s.dir = root_ + "/step-" + std::to_string(step);
  p.waiting.insert(ranks.begin(), ranks.end());
  std::string dir = p.s.dir;
  pending_[step] = std::move(p);
  return dir;
}

Result<std::optional<Snapshot>> SnapshotBook::answer(Participant who, uint64_t step, bool ok, uint32_t units,
                                                     double copy_ms, double ms, const std::string& detail) {
  auto it = pending_.find(step);
  if (it == pending_.end() || !it->second.waiting.erase(who)) return std::optional<Snapshot>{};
  Pending& p = it->second;
  if (!ok) {
    pending_.erase(it);
    return fail("snapshot of step ", step, ": worker ", who.node, ".", who.index, ": ", detail);
  }
  p.s.units += units;
  p.s.slowest_copy_ms = std::max(p.s.slowest_copy_ms, copy_ms);
  p.s.slowest_ms = std::max(p.s.slowest_ms, ms);
  if (!p.waiting.empty()) return std::optional<Snapshot>{};
  Snapshot s = p.s;
  pending_.erase(it);
  if (s.units != model_units_)
    return fail("snapshot of step ", step, " has ", s.units, " units, the model ", model_units_);
  SAL_TRY(write_file(s.dir + "/complete", "step " + std::to_string(s.step) + "\nunits " + std::to_string(s.units) + "\n"));
  complete(s);
  return std::optional<Snapshot>{s};
}

void SnapshotBook::complete(const Snapshot& s) {
  if (!latest_ || s.step >= latest_->step) latest_ = s;
  done_.push_back(s);
  std::sort(done_.begin(), done_.end(), [](const Snapshot& a, const Snapshot& b) { return a.step < b.step; });
  while (done_.size() > keep_) {
    std::error_code ec;
    std::filesystem::remove_all(done_.front().dir, ec);
    if (ec) spdlog::warn("could not remove the old snapshot {}: {}", done_.front().dir, ec.message());
    done_.erase(done_.begin());
  }
}

std::vector<uint64_t> SnapshotBook::drop_waiting_on_lost(const std::vector<Participant>& ready) {
  std::vector<uint64_t> dropped;
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool lost = std::any_of(it->second.waiting.begin(), it->second.waiting.end(), [&](const Participant& p) {
      return std::find(ready.begin(), ready.end(), p) == ready.end();
    });
    if (lost) {
      dropped.push_back(it->first);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return dropped;
}

}  // namespace sal::mesh

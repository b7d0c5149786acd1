// book.cpp — see book.h.
#include "ckpt/book.h"

#include <algorithm>

namespace sal::ckpt {

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

Result<std::optional<SnapshotBook::Completed>> SnapshotBook::answer(Participant who, uint64_t step, bool ok,
                                                                    const Answer& a, const std::string& detail) {
  auto it = pending_.find(step);
  if (it == pending_.end() || !it->second.waiting.erase(who)) return std::optional<Completed>{};
  Pending& p = it->second;
  if (!ok) {
    pending_.erase(it);
    return fail("snapshot of step ", step, ": worker ", who.node, ".", who.index, ": ", detail);
  }
  p.s.units += a.units;
  p.s.bytes += a.bytes;
  p.s.slowest_copy_ms = std::max(p.s.slowest_copy_ms, a.copy_ms);
  p.s.slowest_ms = std::max(p.s.slowest_ms, a.ms);
  if (!p.waiting.empty()) return std::optional<Completed>{};
  Snapshot s = p.s;
  pending_.erase(it);
  if (s.units != model_units_)
    return fail("snapshot of step ", step, " has ", s.units, " units, the model ", model_units_);
  return std::optional<Completed>{Completed{s, keep_newest(s)}};
}

std::vector<std::string> SnapshotBook::keep_newest(const Snapshot& s) {
  if (!latest_ || s.step >= latest_->step) latest_ = s;
  done_.push_back(s);
  std::sort(done_.begin(), done_.end(), [](const Snapshot& a, const Snapshot& b) { return a.step < b.step; });
  std::vector<std::string> dropped;
  while (done_.size() > keep_) {
    dropped.push_back(done_.front().dir);
    done_.erase(done_.begin());
  }
  return dropped;
}

void SnapshotBook::resume(const std::vector<Snapshot>& complete) {
  done_ = complete;
  std::sort(done_.begin(), done_.end(), [](const Snapshot& a, const Snapshot& b) { return a.step < b.step; });
  latest_ = done_.empty() ? std::nullopt : std::optional<Snapshot>(done_.back());
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

}  // namespace sal::ckpt

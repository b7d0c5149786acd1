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
  if (ok) {
    p.written.insert(a.written.begin(), a.written.end());
    p.s.bytes += a.bytes;
    p.s.slowest_copy_ms = std::max(p.s.slowest_copy_ms, a.copy_ms);
    p.s.slowest_ms = std::max(p.s.slowest_ms, a.ms);
  } else {
    p.failures += "; worker " + std::to_string(who.node) + "." + std::to_string(who.index) + ": " + detail;
  }
  return settle(it);
}

// Complete once every unit is written; failed once no one is left to write the rest; else pending.
Result<std::optional<SnapshotBook::Completed>> SnapshotBook::settle(std::map<uint64_t, Pending>::iterator it) {
  Pending& p = it->second;
  p.s.units = uint32_t(p.written.size());
  if (p.s.units >= model_units_) {
    Snapshot s = p.s;
    pending_.erase(it);
    return std::optional<Completed>{Completed{s, keep_newest(s)}};
  }
  if (!p.waiting.empty()) return std::optional<Completed>{};
  uint64_t step = it->first;
  uint32_t units = p.s.units;
  std::string failures = p.failures;
  pending_.erase(it);
  return fail("snapshot of step ", step, " is incomplete: ", units, " of the model's ", model_units_,
              " units written", failures);
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

bool SnapshotBook::forget(const std::string& dir) {
  auto it = std::find_if(done_.begin(), done_.end(), [&](const Snapshot& s) { return s.dir == dir; });
  if (it == done_.end()) return false;
  done_.erase(it);
  latest_ = done_.empty() ? std::nullopt : std::optional<Snapshot>(done_.back());
  return true;
}

void SnapshotBook::resume(const std::vector<Snapshot>& complete) {
  done_ = complete;
  std::sort(done_.begin(), done_.end(), [](const Snapshot& a, const Snapshot& b) { return a.step < b.step; });
  latest_ = done_.empty() ? std::nullopt : std::optional<Snapshot>(done_.back());
}

std::vector<uint64_t> SnapshotBook::drop_waiting_on_lost(const std::vector<Participant>& ready) {
  std::vector<uint64_t> dropped;
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto next = std::next(it);
    auto& waiting = it->second.waiting;
    std::erase_if(waiting, [&](const Participant& p) { return std::find(ready.begin(), ready.end(), p) == ready.end(); });
    if (waiting.empty()) {
      uint64_t step = it->first;
      if (!settle(it)) dropped.push_back(step);  // (a snapshot is complete the moment its last unit is written)
    }
    it = next;
  }
  return dropped;
}

}  // namespace sal::ckpt

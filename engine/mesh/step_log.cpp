// step_log.cpp — see step_log.h.
#include "mesh/step_log.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sal::mesh {

// Records kept in memory (job.metrics() shows a tail; the CSV has them all).
constexpr size_t kRecentRecords = 4096;

StepLog::~StepLog() {
  if (csv_) std::fclose(csv_);
}

namespace {

// A row as add() writes it; false for a line that is not one.
bool parse_row(const char* line, StepRecord& r) {
  unsigned long long step = 0, tokens = 0, plan = 0;
  unsigned workers = 0;
  int n = std::sscanf(line, "%llu,%lf,%lf,%lf,%lf,%lf,%llu,%lf,%lf,%lf,%u,%llu,%lf,%lf", &step, &r.loss, &r.ce, &r.aux,
                      &r.grad_norm, &r.lr, &tokens, &r.step_ms, &r.compute_ms, &r.tokens_per_s, &workers, &plan,
                      &r.time_s, &r.imbalance);
  r.step = step, r.tokens = tokens, r.plan = plan, r.workers = workers;
  // the validation loss, where the step had one: a 15th field (empty on the other steps)
  const char* last = line;
  for (int commas = 0; commas < 14 && last; ++commas) last = std::strchr(last + (commas ? 1 : 0), ',');
  if (last && last[1] != '\n' && last[1] != '\0') r.val_loss = std::strtod(last + 1, nullptr);
  return n == 14;
}

// Drops the rows of steps from `first_dropped` on (rows are in step order, after the header);
// hands each row kept to `kept`.
Status drop_rows_from(const std::string& path, uint64_t first_dropped, const std::function<void(const StepRecord&)>& kept) {
  std::FILE* f = std::fopen(path.c_str(), "r+");
  if (!f) return errno == ENOENT ? Status{} : fail("cannot read ", path, ": ", std::strerror(errno));
  char line[4096];
  long keep = 0;
  bool header = true;
  while (std::fgets(line, sizeof line, f)) {
    if (!header && std::strtoull(line, nullptr, 10) >= first_dropped) break;
    StepRecord r;
    if (!header && parse_row(line, r)) kept(r);
    header = false;
    keep = std::ftell(f);
  }
  int rc = ftruncate(fileno(f), keep);
  std::fclose(f);
  if (rc != 0) return fail("cannot truncate ", path, ": ", std::strerror(errno));
  return {};
}

}  // namespace

Status StepLog::open_csv(const std::string& path, std::optional<uint64_t> resume_at) {
  if (csv_) std::fclose(csv_);
  // a resumed job's summary and progress count the steps before the restart too
  if (resume_at) SAL_TRY(drop_rows_from(path, *resume_at, [this](const StepRecord& r) { remember(r); }));
  csv_ = std::fopen(path.c_str(), resume_at ? "a" : "w");
  if (!csv_) return fail("cannot write ", path, ": ", std::strerror(errno));
  if (std::ftell(csv_) > 0) return {};  // continued: it has its header
  std::fprintf(csv_, "step,loss,ce,aux,grad_norm,lr,tokens,step_ms,compute_ms,tokens_per_s,workers,plan,time_s,imbalance,val_loss\n");
  std::fflush(csv_);
  return {};
}

void StepLog::remember(const StepRecord& r) {
  if (count_ == 0) first_ = r;
  ++count_;
  tokens_ += r.tokens;
  step_s_ += r.step_ms / 1e3;
  recent_.push_back(r);
  if (recent_.size() > kRecentRecords) recent_.pop_front();
  if (!std::isnan(r.val_loss)) {
    if (!first_val_) first_val_ = r;
    last_val_ = r;
  }
}

void StepLog::add(const StepRecord& r) {
  remember(r);
  if (!csv_) return;
  std::fprintf(csv_, "%llu,%.6f,%.6f,%.6f,%.6f,%.6g,%llu,%.3f,%.3f,%.1f,%u,%llu,%.3f,%.3f,",
               static_cast<unsigned long long>(r.step), r.loss, r.ce, r.aux, r.grad_norm, r.lr,
               static_cast<unsigned long long>(r.tokens), r.step_ms, r.compute_ms, r.tokens_per_s, r.workers,
               static_cast<unsigned long long>(r.plan), r.time_s, r.imbalance);
  if (!std::isnan(r.val_loss)) std::fprintf(csv_, "%.9f", r.val_loss);
  std::fputc('\n', csv_);
  std::fflush(csv_);
}

double StepLog::mean_loss(size_t n) const {
  n = std::min(n, recent_.size());
  if (n == 0) return 0;
  double s = 0;
  for (size_t i = recent_.size() - n; i < recent_.size(); ++i) s += recent_[i].loss;
  return s / double(n);
}

double StepLog::recent_tokens_per_s(size_t n) const {
  n = std::min(n, recent_.size());
  double tokens = 0, s = 0;
  for (size_t i = recent_.size() - n; i < recent_.size(); ++i) {
    tokens += double(recent_[i].tokens);
    s += recent_[i].step_ms / 1e3;
  }
  return s > 0 ? tokens / s : 0;
}

}  // namespace sal::mesh

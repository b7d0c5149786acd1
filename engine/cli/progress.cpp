// progress.cpp — see progress.h.
#include "cli/progress.h"

#include <unistd.h>

#include "core/clock.h"

namespace sal::cli {

constexpr int64_t kTtyIntervalNs = 100'000'000;    // 10 redraws a second
constexpr int64_t kFileIntervalNs = 1'000'000'000; // a line a second in logs

ProgressLine::ProgressLine(FILE* out) : out_(out), tty_(isatty(fileno(out))) {}

void ProgressLine::update(const std::string& text, bool force) {
  int64_t now = mono_ns();
  if (!force && now - last_ns_ < (tty_ ? kTtyIntervalNs : kFileIntervalNs)) return;
  if (!tty_ && text == last_text_ && !force) return;
  last_ns_ = now;
  last_text_ = text;
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", text.c_str());
    open_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (tty_ && open_) std::fputc('\n', out_);
  open_ = false;
  std::fflush(out_);
}

}  // namespace sal::cli

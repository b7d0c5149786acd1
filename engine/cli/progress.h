// progress.h — a live progress line: redrawn in place on a terminal (at most 10 times a second),
// one line per second when the output is a file or a pipe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace sal::cli {

class ProgressLine {
 public:
  explicit ProgressLine(FILE* out);
  // Shows `text` if enough time has passed since the last update (or `force`).
  void update(const std::string& text, bool force = false);
  // Ends the line so later output starts on a fresh one.
  void finish();
  bool tty() const { return tty_; }

 private:
  FILE* out_;
  bool tty_;
  bool open_ = false;
  int64_t last_ns_ = 0;
  std::string last_text_;
};

}  // namespace sal::cli

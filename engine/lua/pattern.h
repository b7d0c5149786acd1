// pattern.h — Lua 5.1 string patterns (as LuaJIT's string.find/match/gmatch/gsub read them), matched
// by a backtracking matcher that counts its work and asks a poll function, every few thousand
// steps, whether it may go on.
//
// LuaJIT's own matcher runs inside one C call: a pattern like ('a?'):rep(28)..('a'):rep(28) takes
// seconds to hours there, and no instruction hook fires meanwhile. This one does the same matching
// (same results, same errors, same 200-deep recursion limit) but counts all its work — a step per
// item tried, and each character tested against an item costs the item's width, so a [set] of a
// million characters costs a million steps per test — and stops within one item's test of the poll
// saying no. Pure logic: no Lua state; strlib.cpp binds it to the string library.
//
// Semantics, briefly: a pattern is a sequence of items — a single-character class (`.`, `%a` and
// the other class letters, `%x` for a literal x, a `[set]`, or a plain character) optionally
// followed by `*`, `+`, `-` or `?`; `%b xy`; `%f[set]`; a back-reference `%1`..`%9`; captures `(`
// `)` and position captures `()`. `^` anchors only at the start (the callers handle it) and `$`
// only at the end. As in LuaJIT the pattern ends at its first NUL byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sal::lua::pattern {

constexpr int kMaxCaptures = 32;
constexpr int kMaxDepth = 200;        // recursion depth: "pattern too complex" beyond it
constexpr uint64_t kPollSteps = 4096; // steps between two polls

// A capture's length while it is still open, and the length that marks a position capture.
constexpr ptrdiff_t kUnclosed = -1;
constexpr ptrdiff_t kPosition = -2;

struct Capture {
  const char* init = nullptr;
  ptrdiff_t len = kUnclosed;
};

// Returns false to stop the match (its budget is spent).
using Poll = bool (*)(void* ctx);

// Why a match ended without a result: none (it simply did not match), a malformed pattern (the
// message is LuaJIT's), or the poll said stop.
enum class Stop { none, malformed, budget };

class Matcher {
 public:
  // `src` must outlive the matcher; `pat` is cut at its first NUL.
  Matcher(std::string_view src, std::string_view pat, Poll poll = nullptr, void* poll_ctx = nullptr);

  // Matches the pattern from pattern offset `p_off` against the subject at `s`; returns the end of
  // the match or nullptr (then stop() says whether it failed or was stopped). Resets the captures.
  const char* match_at(const char* s, size_t p_off = 0);

  const char* src_begin() const { return src_; }
  const char* src_end() const { return src_end_; }
  size_t pattern_size() const { return size_t(p_end_ - pat_); }
  const char* pattern() const { return pat_; }

  int levels() const { return level_; }
  const Capture& capture(int i) const { return capture_[i]; }

  Stop stop() const { return stop_; }
  const char* error() const { return error_; }  // the message when stop() == malformed
  uint64_t steps() const { return steps_; }

  // The byte every match from pattern offset `p_off` must start with — a plain character not
  // followed by `*`, `?` or `-` — or -1. Callers skip to its next occurrence (memchr) instead of
  // trying every position: a match cannot start anywhere else.
  int first_byte(size_t p_off) const;
  // The next position from s where a match could start, given first_byte (s itself when -1); null
  // when there is none before the end.
  const char* next_start(const char* s, int first) const;

  // Raises "invalid capture index" / "unfinished capture" for capture i of a match s..e; used by
  // the callers when they read captures (returns false and sets the error).
  bool check_capture_for_result(int i);

 private:
  const char* match(const char* s, const char* p);
  const char* item_end(const char* p);
  bool single(unsigned char c, const char* p, const char* ep) const;
  bool in_set(unsigned char c, const char* p, const char* ec) const;
  static uint64_t item_cost(const char* p, const char* ep);
  const char* max_expand(const char* s, const char* p, const char* ep);
  const char* min_expand(const char* s, const char* p, const char* ep);
  const char* open_capture(const char* s, const char* p, ptrdiff_t what);
  const char* close_capture(const char* s, const char* p);
  const char* balance(const char* s, const char* p);
  const char* back_reference(const char* s, unsigned char digit);
  const char* frontier(const char* s, const char*& p);
  bool step(uint64_t n = 1);
  const char* malformed(const char* message);

  const char* src_;
  const char* src_end_;
  const char* pat_;
  const char* p_end_;
  Poll poll_;
  void* poll_ctx_;
  int level_ = 0;
  int depth_ = 0;
  Capture capture_[kMaxCaptures];
  Stop stop_ = Stop::none;
  const char* error_ = nullptr;
  uint64_t steps_ = 0;
  uint64_t next_poll_ = kPollSteps;
};

// True if the pattern has none of the characters that make it a pattern, anywhere in its text
// (find then searches for it as plain text, as LuaJIT does).
bool is_plain(std::string_view pat);

// True for c in the class letter `cl` (a c d l p s u w x z, upper case for the complement; any
// other character stands for itself), in the C locale.
bool class_match(unsigned char c, unsigned char cl);

}  // namespace sal::lua::pattern

// pattern.cpp — see pattern.h. Every function that can fail returns nullptr and leaves the reason
// in stop_; callers test stop_ after each nested call, so a malformed pattern or a spent budget
// unwinds the recursion without longjmp.
#include "lua/pattern.h"

#include <cstring>
#include <utility>

namespace sal::lua::pattern {
namespace {

constexpr char kEsc = '%';

bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_cntrl(unsigned char c) { return c < 32 || c == 127; }
bool is_alnum(unsigned char c) { return is_alpha(c) || is_digit(c); }
bool is_punct(unsigned char c) { return c > 32 && c < 127 && !is_alnum(c); }
bool is_xdigit(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_graph(unsigned char c) { return c > 32 && c < 127; }  // %g: printable except space (LuaJIT 2.1 has it)

// Per class letter (lower case), the characters in it: kClasses[letter][c], built once (C locale).
struct ClassTable {
  bool in[128][256] = {};
  bool is_class[128] = {};
  ClassTable() {
    using Test = bool (*)(unsigned char);
    const std::pair<char, Test> classes[] = {
        {'a', is_alpha}, {'c', is_cntrl}, {'d', is_digit}, {'g', is_graph}, {'l', is_lower}, {'p', is_punct},
        {'s', is_space}, {'u', is_upper}, {'w', is_alnum}, {'x', is_xdigit}, {'z', [](unsigned char c) { return c == 0; }}};
    for (auto [letter, test] : classes) {
      is_class[int(letter)] = true;
      for (int c = 0; c < 256; ++c) in[int(letter)][c] = test(static_cast<unsigned char>(c));
    }
  }
};
const ClassTable kClasses;

}  // namespace

bool class_match(unsigned char c, unsigned char cl) {
  unsigned char letter = is_upper(cl) ? static_cast<unsigned char>(cl - 'A' + 'a') : cl;
  if (letter >= 128 || !kClasses.is_class[letter]) return cl == c;
  return kClasses.in[letter][c] != is_upper(cl);
}

bool is_plain(std::string_view pat) {
  // The whole text, NULs included, as LuaJIT looks (the matcher itself stops at the first NUL).
  for (char c : pat)
    if (c != '\0' && std::strchr("^$*+?.([%-", c)) return false;
  return true;
}

Matcher::Matcher(std::string_view src, std::string_view pat, Poll poll, void* poll_ctx)
    : src_(src.data()), src_end_(src.data() + src.size()), pat_(pat.data()), poll_(poll), poll_ctx_(poll_ctx) {
  size_t n = pat.find('\0');
  p_end_ = pat_ + (n == std::string_view::npos ? pat.size() : n);
}

bool Matcher::step(uint64_t n) {
  steps_ += n;
  if (steps_ < next_poll_) return true;
  next_poll_ = steps_ + kPollSteps;
  if (poll_ && !poll_(poll_ctx_)) {
    stop_ = Stop::budget;
    return false;
  }
  return true;
}

const char* Matcher::malformed(const char* message) {
  if (stop_ == Stop::none) {
    stop_ = Stop::malformed;
    error_ = message;
  }
  return nullptr;
}

const char* Matcher::match_at(const char* s, size_t p_off) {
  level_ = 0;
  depth_ = 0;
  return match(s, pat_ + p_off);
}

int Matcher::first_byte(size_t p_off) const {
  const char* p = pat_ + p_off;
  if (p >= p_end_ || std::strchr("^$*+?.([%-)]", *p) || *p == '\0') return -1;
  if (p + 1 < p_end_ && (p[1] == '*' || p[1] == '?' || p[1] == '-')) return -1;
  return static_cast<unsigned char>(*p);
}

const char* Matcher::next_start(const char* s, int first) const {
  if (first < 0 || s >= src_end_) return s;
  return static_cast<const char*>(std::memchr(s, first, size_t(src_end_ - s)));
}

bool Matcher::check_capture_for_result(int i) {
  if (i >= level_) {
    if (i == 0) return true;  // the whole match stands in for capture 1
    malformed("invalid capture index");
    return false;
  }
  if (capture_[i].len == kUnclosed) {
    malformed("unfinished capture");
    return false;
  }
  return true;
}

// The end of the single-character item at p (one past its last byte).
const char* Matcher::item_end(const char* p) {
  char c = *p++;
  if (c == kEsc) {
    if (p >= p_end_) return malformed("malformed pattern (ends with '%')");
    return p + 1;
  }
  if (c == '[') {
    if (p < p_end_ && *p == '^') ++p;
    // The first character of a set is never its end: "[]]" is the set of ']'.
    do {
      if (p >= p_end_) return malformed("malformed pattern (missing ']')");
      char d = *p++;
      if (d == kEsc && p < p_end_) ++p;
    } while (p >= p_end_ || *p != ']');
    return p + 1;
  }
  return p;
}

// c in the set [ ... ] that starts at p ('[') and whose ']' is at ec.
bool Matcher::in_set(unsigned char c, const char* p, const char* ec) const {
  bool want = true;
  if (p[1] == '^') {
    want = false;
    ++p;
  }
  while (++p < ec) {
    if (*p == kEsc) {
      ++p;
      if (class_match(c, static_cast<unsigned char>(*p))) return want;
    } else if (p[1] == '-' && p + 2 < ec) {
      unsigned char lo = static_cast<unsigned char>(p[0]), hi = static_cast<unsigned char>(p[2]);
      p += 2;
      if (lo <= c && c <= hi) return want;
    } else if (static_cast<unsigned char>(*p) == c) {
      return want;
    }
  }
  return !want;
}

bool Matcher::single(unsigned char c, const char* p, const char* ep) const {
  switch (*p) {
    case '.': return true;
    case kEsc: return class_match(c, static_cast<unsigned char>(p[1]));
    case '[': return in_set(c, p, ep - 1);
    default: return static_cast<unsigned char>(*p) == c;
  }
}

// What testing one character against the item p..ep costs, in steps: its width in the pattern (1
// for a plain character, 2 for a class, the whole set for a [set], which in_set scans).
uint64_t Matcher::item_cost(const char* p, const char* ep) { return uint64_t(ep - p); }

const char* Matcher::max_expand(const char* s, const char* p, const char* ep) {
  const uint64_t cost = item_cost(p, ep);
  ptrdiff_t n = 0;
  while (s + n < src_end_ && single(static_cast<unsigned char>(s[n]), p, ep)) {
    ++n;
    if (!step(cost)) return nullptr;
  }
  // Longest first, then give back one character at a time.
  for (; n >= 0; --n) {
    const char* r = match(s + n, ep + 1);
    if (r || stop_ != Stop::none) return r;
  }
  return nullptr;
}

const char* Matcher::min_expand(const char* s, const char* p, const char* ep) {
  const uint64_t cost = item_cost(p, ep);
  for (;;) {
    const char* r = match(s, ep + 1);
    if (r || stop_ != Stop::none) return r;
    if (!step(cost)) return nullptr;
    if (s < src_end_ && single(static_cast<unsigned char>(*s), p, ep)) {
      ++s;
    } else {
      return nullptr;
    }
  }
}

const char* Matcher::open_capture(const char* s, const char* p, ptrdiff_t what) {
  if (level_ >= kMaxCaptures) return malformed("too many captures");
  capture_[level_] = {s, what};
  ++level_;
  const char* r = match(s, p);
  if (!r) --level_;
  return r;
}

const char* Matcher::close_capture(const char* s, const char* p) {
  int open = level_ - 1;
  while (open >= 0 && capture_[open].len != kUnclosed) --open;
  if (open < 0) return malformed("invalid pattern capture");
  capture_[open].len = s - capture_[open].init;
  const char* r = match(s, p);
  if (!r) capture_[open].len = kUnclosed;
  return r;
}

// %bxy at p (p points at x): a balanced run from x to its matching y.
const char* Matcher::balance(const char* s, const char* p) {
  if (p + 1 >= p_end_) return malformed("unbalanced pattern");
  if (s >= src_end_ || *s != p[0]) return nullptr;
  const char open = p[0], close = p[1];
  int depth = 1;
  while (++s < src_end_) {
    if (!step()) return nullptr;
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      ++depth;
    }
  }
  return nullptr;
}

const char* Matcher::back_reference(const char* s, unsigned char digit) {
  int i = digit - '1';
  if (i < 0 || i >= level_ || capture_[i].len == kUnclosed) return malformed("invalid capture index");
  ptrdiff_t len = capture_[i].len;
  if (len < 0) return nullptr;  // a position capture never matches text
  if (!step(uint64_t(len) / 64)) return nullptr;
  if (src_end_ - s >= len && std::memcmp(capture_[i].init, s, size_t(len)) == 0) return s + len;
  return nullptr;
}

// %f[set] at p (p points at 'f'): the boundary where the previous character is not in the set and
// the next one is (the subject's ends count as '\0'). Advances p past the set on success.
const char* Matcher::frontier(const char* s, const char*& p) {
  p += 1;
  if (p >= p_end_ || *p != '[') return malformed("missing '[' after '%f' in pattern");
  const char* ep = item_end(p);
  if (!ep || !step(3 * item_cost(p, ep))) return nullptr;  // the set scanned for its end, then tested twice
  unsigned char prev = s == src_ ? 0 : static_cast<unsigned char>(s[-1]);
  unsigned char next = s < src_end_ ? static_cast<unsigned char>(*s) : 0;
  if (in_set(prev, p, ep - 1) || !in_set(next, p, ep - 1)) return nullptr;
  p = ep;
  return s;
}

const char* Matcher::match(const char* s, const char* p) {
  if (++depth_ > kMaxDepth) return malformed("pattern too complex");
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  for (;;) {
    if (!step()) return nullptr;
    if (p >= p_end_) return s;
    switch (*p) {
      case '(':
        if (p + 1 < p_end_ && p[1] == ')') return open_capture(s, p + 2, kPosition);
        return open_capture(s, p + 1, kUnclosed);
      case ')':
        return close_capture(s, p + 1);
      case '$':
        if (p + 1 == p_end_) return s == src_end_ ? s : nullptr;
        break;
      case kEsc:
        if (p + 1 < p_end_) {
          unsigned char next = static_cast<unsigned char>(p[1]);
          if (next == 'b') {
            s = balance(s, p + 2);
            if (!s) return nullptr;
            p += 4;
            continue;
          }
          if (next == 'f') {
            ++p;
            if (!frontier(s, p)) return nullptr;
            continue;
          }
          if (is_digit(next)) {
            s = back_reference(s, next);
            if (!s) return nullptr;
            p += 2;
            continue;
          }
        }
        break;
      default:
        break;
    }
    const char* ep = item_end(p);
    if (!ep || !step(2 * item_cost(p, ep))) return nullptr;  // the item scanned for its end, then tested
    bool m = s < src_end_ && single(static_cast<unsigned char>(*s), p, ep);
    char quantifier = ep < p_end_ ? *ep : '\0';
    switch (quantifier) {
      case '?': {
        if (m) {
          const char* r = match(s + 1, ep + 1);
          if (r || stop_ != Stop::none) return r;
        }
        p = ep + 1;
        continue;
      }
      case '*': return max_expand(s, p, ep);
      case '+': return m ? max_expand(s + 1, p, ep) : nullptr;
      case '-': return min_expand(s, p, ep);
      default:
        if (!m) return nullptr;
        ++s;
        p = ep;
        continue;
    }
  }
}

}  // namespace sal::lua::pattern

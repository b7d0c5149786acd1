// meter.h — what moving Lua values into C++ may cost. A conversion (a REPL result rendered as text
// or JSON, a policy's saved state copied to another state, a drill's arguments, the audit log's
// quote of a call) walks values that can be small in Lua and huge once walked: 64 references to
// one 64-entry table, nested four deep, are 16.7 M values, and their text gigabytes outside any
// Lua memory cap. A Meter counts the values a conversion visits and the bytes it produces against
// named limits, and asks the running call's budget (sandbox.h) every few hundred values, so the
// conversion stops at whichever comes first with an error that names it — and the C++ memory it
// holds meanwhile stays bounded by its limits.
#pragma once

#include <lua.hpp>

#include <cstddef>
#include <string>

#include "core/result.h"

namespace sal::lua {

// One limit and how an error names it: {1 << 20, "the REPL's result limit"} gives "the result:
// more than 1048576 bytes (the REPL's result limit)".
struct Limit {
  size_t max = 0;
  std::string name;
};

struct MeterLimits {
  std::string what = "the value";  // the conversion, as errors name it ("the result")
  Limit values{size_t(1) << 20, "the conversion's value limit"};
  Limit bytes{size_t(64) << 20, "the conversion's byte limit"};
};

// What a visited value may cost in C++ while a conversion holds it (its text, a JSON node, a sort
// entry): the divisor that turns a memory cap into a value limit (within_memory).
constexpr size_t kValueCost = 128;

// `limits` lowered to what `memory_left` bytes allow (values at kValueCost each, half of it for
// bytes), naming `memory_name` ("repl.memory_mb (64 MiB)") for each limit it lowers.
MeterLimits within_memory(MeterLimits limits, size_t memory_left, const std::string& memory_name);

class Meter {
 public:
  // Polls the budget of the call running in L (none: only the limits count).
  Meter(lua_State* L, MeterLimits limits);

  // One more value visited; an error once past the value limit or once the budget is spent.
  Status value();
  // `n` values at once: what a size read from Lua (nodes x slots) makes C++ hold.
  Status values(uint64_t n);
  // `n` more bytes produced; an error once past the byte limit.
  Status bytes(size_t n);
  // The byte limit checked against a finished text of `n` bytes.
  Status check_total(size_t n) const;
  // A step of work that produces no value (a key looked at to tell a list from a map): only the
  // budget is asked, as often as value() asks it.
  Status step();

  size_t values_seen() const { return values_; }
  size_t bytes_seen() const { return bytes_; }
  const MeterLimits& limits() const { return limits_; }

 private:
  Error over(const Limit& l, const char* unit) const;

  lua_State* L_;
  MeterLimits limits_;
  size_t values_ = 0;
  size_t bytes_ = 0;
  size_t steps_ = 0;
};

}  // namespace sal::lua

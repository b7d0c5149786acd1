// meter.cpp — see meter.h.
#include "lua/meter.h"

#include <algorithm>
#include <utility>

#include "lua/sandbox.h"

namespace sal::lua {

// Values between two looks at the budget: a value costs well under a microsecond to convert, so
// the budget is honoured to a fraction of a millisecond, and the clock is read rarely.
constexpr size_t kPollValues = 256;

MeterLimits within_memory(MeterLimits limits, size_t memory_left, const std::string& memory_name) {
  if (memory_left / kValueCost < limits.values.max) limits.values = {memory_left / kValueCost, memory_name};
  if (memory_left / 2 < limits.bytes.max) limits.bytes = {memory_left / 2, memory_name};
  return limits;
}

Meter::Meter(lua_State* L, MeterLimits limits) : L_(L), limits_(std::move(limits)) {}

Error Meter::over(const Limit& l, const char* unit) const {
  return fail(limits_.what, ": more than ", l.max, " ", unit, " (", l.name, ")");
}

Status Meter::value() {
  if (++values_ > limits_.values.max) return over(limits_.values, "values");
  return step();
}

Status Meter::values(uint64_t n) {
  if (n > limits_.values.max || values_ + n > limits_.values.max) return over(limits_.values, "values");
  values_ += size_t(n);
  return step();
}

Status Meter::step() {
  if (++steps_ % kPollValues == 0 && !budget_poll(L_))
    return Error(budget_message(L_) + " while converting " + limits_.what);
  return {};
}

Status Meter::bytes(size_t n) {
  bytes_ += n;
  if (bytes_ > limits_.bytes.max) return over(limits_.bytes, "bytes");
  return {};
}

Status Meter::check_total(size_t n) const {
  if (n > limits_.bytes.max) return over(limits_.bytes, "bytes");
  return {};
}

}  // namespace sal::lua

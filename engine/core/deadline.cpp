// deadline.cpp — see deadline.h.
#include "core/deadline.h"

#include <algorithm>

#include "core/clock.h"

namespace sal {
namespace {

thread_local int64_t t_deadline_ns = 0;  // 0: none

}  // namespace

DeadlineScope::DeadlineScope(int64_t deadline_ns) : saved_(t_deadline_ns) {
  t_deadline_ns = saved_ ? std::min(saved_, deadline_ns) : deadline_ns;
}

DeadlineScope::~DeadlineScope() { t_deadline_ns = saved_; }

bool deadline_passed() { return t_deadline_ns != 0 && mono_ns() >= t_deadline_ns; }

}  // namespace sal

// clock.h — the engine's clocks. Monotonic time (CLOCK_MONOTONIC, shared by every process on one
// machine, so detection latencies can be compared across processes) and wall time for logs/reports.
#pragma once

#include <cstdint>
#include <ctime>

namespace sal {

inline int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
inline int64_t mono_ms() { return mono_ns() / 1'000'000; }
inline double mono_s() { return double(mono_ns()) * 1e-9; }

inline int64_t wall_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace sal

// skip_main.h — for test programs with a main of their own that report skipped (CTest's
// SKIP_RETURN_CODE 77) when what they need is missing: the exit code, and whether the run only
// lists the cases (CTest's discovery), which must work either way.
#pragma once

#include <string>

namespace sal::test {

constexpr int kSkipped = 77;

inline bool listing_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--list-test-cases", 0) == 0 || a.rfind("-ltc", 0) == 0 || a == "-h" || a == "--help") return true;
  }
  return false;
}

}  // namespace sal::test

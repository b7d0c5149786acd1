// libfuzzer_main.cpp — the libFuzzer entry point of one target (SAL_FUZZ_TARGET names it; see
// targets.h). Built only with clang and -DSAL_FUZZ=ON.
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return sal::fuzz::SAL_FUZZ_TARGET(data, size);
}

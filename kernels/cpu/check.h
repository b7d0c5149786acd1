// check.h — fail-fast checks for caller bugs in the CPU kernels (a shape that cannot be, a token id
// outside the vocabulary). These are programming errors, not faults of a peer or of the hardware:
// the process stops with the condition and where it was, as llm.c's checks do. Kept on in release
// builds: each guards a whole kernel call (or one id), never an inner loop.
#pragma once

#include <cstdio>
#include <cstdlib>

#define SAL_KCHECK(cond, what)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: kernel check failed: %s (%s)\n", __FILE__, __LINE__, #cond, what); \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

// test_main.cpp — doctest's main for every test program: runs the cases asked for, then removes
// the scratch directories they made if all passed (support/temp_dirs.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/temp_dirs.h"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return sal::test::finish_temp_dirs(context.run());
}

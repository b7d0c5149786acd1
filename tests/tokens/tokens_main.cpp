// tokens_main.cpp — doctest's main for the tests that need a tokenizer (Debian's
// libsentencepiece-dev): in a build without it the program says so and exits 77, which CTest
// reports as skipped — never as passed. Listing the cases works either way.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support/skip_main.h"
#include "support/temp_dirs.h"
#include "tokens/tokenizer.h"

int main(int argc, char** argv) {
  if (!sal::test::listing_only(argc, argv) && !sal::tokens::available()) {
    std::printf("skipped: %s\n", sal::tokens::check_available().error().message().c_str());
    return sal::test::kSkipped;
  }
  doctest::Context context(argc, argv);
  return sal::test::finish_temp_dirs(context.run());
}

// test_check_chunk.cpp — the console's multi-line test: incomplete chunks wait for more lines,
// complete ones (expressions or statements) go, syntax errors are reported at once.
#include <doctest/doctest.h>

#include "repl/client.h"

using namespace sal::repl;

TEST_CASE("complete, incomplete and broken chunks") {
  CHECK(check_chunk("job.status()") == ChunkState::complete);
  CHECK(check_chunk("1 + 2") == ChunkState::complete);
  CHECK(check_chunk("x = 1") == ChunkState::complete);
  CHECK(check_chunk("for i = 1, 3 do") == ChunkState::incomplete);
  CHECK(check_chunk("for i = 1, 3 do\n  print(i)") == ChunkState::incomplete);
  CHECK(check_chunk("for i = 1, 3 do\n  print(i)\nend") == ChunkState::complete);
  CHECK(check_chunk("f(") == ChunkState::incomplete);
  CHECK(check_chunk("s = [[long") == ChunkState::incomplete);
  std::string err;
  CHECK(check_chunk("x = = 1", &err) == ChunkState::error);
  CHECK(err.find("unexpected symbol") != std::string::npos);
}

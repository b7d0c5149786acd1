// test_load_files.cpp — expert loads read from files as people and tools write them: the SmartMoE
// trace lines (micro-batches summed, one list or several, spaces around the colon, in the order of
// their layer labels), CSV with commas, ';', tabs or spaces (quotes, a byte order mark, a trailing
// separator, a header of column names), a JSON array of layers; and every malformed file refused
// naming the file, the line and the value.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/load_files.h"

using namespace sal;

namespace {

using Layers = std::vector<std::vector<double>>;

Layers read(const std::string& text) {
  auto r = parse_loads(text, "loads.txt");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message()));
  return *r;
}

void refused(const std::string& text, const std::string& expect) {
  auto r = parse_loads(text, "loads.txt");
  REQUIRE_FALSE(r.ok());
  CHECK_MESSAGE(r.error().message().find(expect) != std::string::npos, r.error().message());
}

}  // namespace

TEST_CASE("loads: SmartMoE lines sum their micro-batches, and every CSV or JSON spelling reads the same") {
  const Layers expected{{5, 7, 9}, {8, 9, 10}};
  CHECK(read("0:[[1, 2, 3], [4, 5, 6]]\n1:[[7, 8, 9], [1, 1, 1]]\n") == expected);
  CHECK(read("0 : [[5,7,9]]\r\n1: [ [8,9,10] ]\r\n") == expected);  // spaces, CRLF
  CHECK(read("0:[5, 7, 9]\n1:[8, 9, 10]\n") == expected);            // one list: one micro-batch
  CHECK(read("1:[8, 9, 10]\n0:[5, 7, 9]\n") == expected);            // in the order of their labels
  CHECK(read("2:[8, 9, 10]\n1:[5, 7, 9]\n") == expected);            // counted from 1
  CHECK(read("13:[8, 9, 10]\n12:[5, 7, 9]\n") == expected);          // a pipeline stage's layers
  for (const std::string& csv : {std::string("5,7,9\n8,9,10\n"), std::string("\xEF\xBB\xBF" "5,7,9\n8,9,10\n"),
                                 std::string("e0,e1,e2\n5,7,9\n8,9,10\n"), std::string("\"e0\";\"e1\";\"e2\"\n5;7;9\n8;9;10\n"),
                                 std::string("5\t7\t9\n8\t9\t10\n"), std::string("5 7 9\n8 9 10\n"),
                                 std::string("5,7,9,\n8,9,10,\n"), std::string("# a comment\n\n5,7,9\n8,9,10\n"),
                                 std::string("[[5, 7, 9],\n [8, 9, 10]]\n"),
                                 // a column of layer labels: named in the header, pandas' index, or in each row
                                 std::string("layer,e0,e1,e2\n0,5,7,9\n1,8,9,10\n"),
                                 std::string(",0,1,2\n0,5,7,9\n1,8,9,10\n"),
                                 std::string("Layer_ID,e0,e1,e2\n0,5,7,9\n1,8,9,10\n"),
                                 std::string("layer0,5,7,9\nlayer1,8,9,10\n"),
                                 std::string("moe.0 5 7 9\nmoe.1 8 9 10\n"),
                                 // a JSON object of layers, ordered by the number in their names
                                 std::string("{\"layer10\": [8, 9, 10], \"layer2\": [5, 7, 9]}"),
                                 // an object whose one member is the array of layers
                                 std::string("{\"layers\": [[5, 7, 9], [8, 9, 10]]}")}) {
    CAPTURE(csv);
    CHECK(read(csv) == expected);
  }
}

TEST_CASE("loads: malformed files are refused naming the file, the line and the value") {
  refused("5,7,9\n8,-1,10\n", "loads.txt:2: '-1' is not a token count");
  refused("5,7,9\n8,nan,10\n", "loads.txt:2: 'nan' is not a token count");
  refused("5,7,9\n8,9\n", "loads.txt:2: 2 experts, but the first layer has 3");
  refused("e0,e1\nx,y\n", "loads.txt:2: 'x' is not a token count");  // one header only
  refused("0:[[1, 2], [3]]\n", "loads.txt:1: micro-batches differ in length");
  refused("0:[[1, -2]]\n", "loads.txt:1: bad count at expert 1");
  refused("0:[oops]\n", "loads.txt:1: expected <layer>:[[counts], ...]");
  refused("0:[1, 2]\n1:[3, 4]\n0:[5, 6]\n", "loads.txt:3: layer 0 again (line 1 has it)");
  refused("0:[1, 2]\n2:[3, 4]\n", "loads.txt: no line for layer 1 (line 2 is layer 2)");
  refused("0:[1, 2]\n3,4\n", "loads.txt:2: a CSV row after SmartMoE lines: one file is one format");
  refused("1,2\n1:[3, 4]\n", "loads.txt:2: a SmartMoE line (<layer>:[[counts], ...]) after CSV rows");
  refused("12345678901:[1, 2]\n", "loads.txt:1: layer label '12345678901' is not a layer number");
  refused("[[1, 2], [3]]\n", "loads.txt: layer 1 has 1 experts, but the first layer has 2");
  refused("[[1, -2]]\n", "loads.txt: layer 0, expert 1: -2 is not a token count");
  refused("# nothing\n\n", "loads.txt: no loads");
  refused("e0,e1\n", "loads.txt: no loads");
  refused("layer0,5,x\n", "loads.txt:1: 'layer0' is not a token count");  // a label only before counts
  // columns named for their experts are experts, whatever their names begin with
  CHECK(read("layer0.expert0,layer0.expert1\n5,7\n") == Layers{{5, 7}});
  refused("{\"layer0\": [1, -2]}", "loads.txt: layer 0, expert 1: -2 is not a token count");
  // JSON of another shape says what shapes are read, not that its first cell is no count
  for (const std::string& other : {std::string("{\"loads\": 5}"), std::string("{\"a\": [[1, 2]], \"b\": [[3, 4]]}"),
                                   std::string("[[1, 2], [\"x\", 3]]"), std::string("{}")}) {
    CAPTURE(other);
    refused(other, "loads.txt: JSON, but not loads: expected an array of layers ([[counts of layer 0], ...])");
  }
}

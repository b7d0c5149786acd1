// test_token_file.cpp — a token file and its sidecars (engine/tokens/token_file.h) without a
// tokenizer: ids written as uint16 or uint32 read back through the corpus a job loads, the index
// and the description read back and checked, and the rules refused by name (an id outside the
// vocabulary, a dtype too small for it, an index that does not rise).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/data.h"
#include "tokens/token_file.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::tokens;

namespace {

std::string token_dir(const std::string& name) {
  static const std::filesystem::path root = sal::test::temp_dir("token-file");
  auto dir = root / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Writes three documents of the given ids; the third empty.
Result<TokenFileInfo> write_three(const std::string& out, const std::string& dtype, int vocab,
                                  const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  auto w = TokenWriter::open(out, dtype, vocab);
  if (!w) return w.error();
  w->begin_document();
  SAL_TRY(w->append(a));
  w->begin_document();
  SAL_TRY(w->append(b));
  w->begin_document();
  TokenFileInfo info;
  info.tokenizer = "/models/t.model";
  info.document_rule = "file";
  info.input = "/texts";
  info.bytes = 123;
  info.files = {{"/texts/a", 100, 0, 2}, {"/texts/b", 23, 2, 1}};
  return w->finish(info);
}

}  // namespace

TEST_CASE("data token file: uint32 ids above 65535 and uint16 ids read back through the job's corpus, with index and description") {
  const std::string dir = token_dir("roundtrip");
  const std::vector<uint32_t> a = {70000, 1, 65536, 99999}, b = {5, 6, 7};
  auto info = write_three(dir + "/t.u32", "uint32", 100000, a, b);
  REQUIRE_MESSAGE(info.ok(), info.error().message());
  CHECK(std::filesystem::file_size(dir + "/t.u32") == 7 * 4);
  auto corpus = model::Corpus::load(dir + "/t.u32", "uint32", 100000, 4);
  REQUIRE_MESSAGE(corpus.ok(), corpus.error().message());
  CHECK(corpus->copy_tokens() == std::vector<uint32_t>{70000, 1, 65536, 99999, 5, 6, 7});
  auto idx = read_index(index_path(dir + "/t.u32"));
  REQUIRE(idx.ok());
  CHECK(*idx == std::vector<uint64_t>{0, 4, 7, 7});
  auto back = read_description(description_path(dir + "/t.u32"));
  REQUIRE_MESSAGE(back.ok(), back.error().message());
  CHECK(back->dtype == "uint32");
  CHECK(back->vocab == 100000);
  CHECK(back->token_count == 7);
  CHECK(back->documents == 3);
  CHECK(back->tokens == dir + "/t.u32");
  CHECK(back->index == dir + "/t.u32.idx");
  CHECK(back->tokenizer == "/models/t.model");
  CHECK(back->files.size() == 2);
  CHECK(back->files[1].first_document == 2);

  const std::vector<uint32_t> small = {0, 65535, 256, 3};
  REQUIRE(write_three(dir + "/t.u16", "uint16", 65536, small, {9}).ok());
  CHECK(std::filesystem::file_size(dir + "/t.u16") == 5 * 2);
  auto c16 = model::Corpus::load(dir + "/t.u16", "uint16", 65536, 4);
  REQUIRE(c16.ok());
  CHECK(c16->copy_tokens() == std::vector<uint32_t>{0, 65535, 256, 3, 9});
  // nothing temporary left behind
  for (const auto& e : std::filesystem::directory_iterator(dir))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("data token file rules: the dtype must hold the vocabulary, ids must be below it, a writer not finished leaves nothing") {
  CHECK(dtype_for(256) == "uint16");
  CHECK(dtype_for(65536) == "uint16");
  CHECK(dtype_for(65537) == "uint32");
  CHECK(check_dtype("uint16", 65536).ok());
  auto small = check_dtype("uint16", 65537);
  REQUIRE_FALSE(small.ok());
  CHECK(small.error().message() == "dtype uint16 holds ids below 65536, and the tokenizer's vocabulary has 65537 ids: "
                                   "use uint32 (or let the vocabulary choose)");
  CHECK(check_dtype("uint8", 100).error().message() == "dtype 'uint8': expected uint16 or uint32");
  const std::string dir = token_dir("rules");
  CHECK_FALSE(TokenWriter::open(dir + "/x", "uint16", 70000).ok());
  {
    auto w = TokenWriter::open(dir + "/x", "uint16", 500);
    REQUIRE(w.ok());
    w->begin_document();
    auto bad = w->append({1, 2, 500});
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message() == dir + "/x: id 500 (token 2) is outside the vocabulary of 500");
  }
  CHECK(std::filesystem::is_empty(dir));  // the unfinished writer removed its temporary file
}

TEST_CASE("data token file index and description: what is not one is refused by name") {
  const std::string dir = token_dir("broken");
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  auto le = [](std::vector<uint64_t> v) {
    std::string out;
    for (uint64_t x : v)
      for (int b = 0; b < 8; ++b) out += char((x >> (8 * b)) & 0xff);
    return out;
  };
  CHECK(read_index(write("short.idx", "1234567")).error().message().find("not a whole number") != std::string::npos);
  CHECK(read_index(write("falls.idx", le({0, 5, 3}))).error().message() ==
        dir + "/falls.idx: offset 2 (3) is below the one before (5)");
  CHECK(read_index(write("start.idx", le({2, 5}))).error().message() ==
        dir + "/start.idx: the first document begins at 2, not 0");
  CHECK(read_description(write("x.json", "{\"format\": \"other\"}")).error().message() ==
        dir + "/x.json: not a token file description (format \"salamander-tokens\", version 1)");
  CHECK(read_description(write("y.json", "not json")).error().message().find(dir + "/y.json: ") == 0);
}

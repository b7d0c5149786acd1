// test_corpus.cpp — the corpus a job trains on, read from files: ids of 4 bytes (data.format =
// "uint32") at and above 65536 load and batch as they are written, a uint16 file loads the ids it
// always did, a file is mapped (copies share it; it stays as loaded when replaced or removed),
// bytes stay bytes, and each broken rule (an id outside model.vocab, a size that is not
// a whole number of ids, a directory of ids) is an error naming the file and the rule.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/data.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::model;

namespace {

std::string temp_path(const std::string& name) {
  static const std::string dir = sal::test::temp_dir("corpus");
  return dir + "/" + name;
}

// Ids written little-endian, `width` bytes each, by hand (not by the code under test).
std::string write_ids(const std::string& name, const std::vector<uint32_t>& ids, int width) {
  std::string bytes;
  for (uint32_t id : ids)
    for (int b = 0; b < width; ++b) bytes += char((id >> (8 * b)) & 0xff);
  std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string write_text(const std::string& name, const std::string& text) {
  std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("corpus uint32: ids at and above 65536 load as written and batch in order") {
  std::vector<uint32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = 65536 + uint32_t((i * 7919) % 34464);  // 65536 .. 99999
  ids[17] = 99999;
  const std::string path = write_ids("big.u32", ids, 4);
  auto c = Corpus::load(path, "uint32", 100000, 8);
  REQUIRE_MESSAGE(c.ok(), c.error().message());
  REQUIRE(c->size() == ids.size());
  CHECK(c->copy_tokens() == ids);
  // every sequence of a batch is a window of the file: its targets are its inputs shifted by one
  const int T = 8;
  for (uint64_t step = 0; step < 5; ++step) {
    Batch b = make_batch(*c, 11, step, 0, 6, T);
    REQUIRE(b.inputs.size() == size_t(6 * T));
    for (int s = 0; s < 6; ++s) {
      auto first = std::search(ids.begin(), ids.end(), b.inputs.begin() + s * T, b.inputs.begin() + (s + 1) * T,
                               [](uint32_t a, int32_t x) { return int64_t(a) == int64_t(x); });
      REQUIRE(first != ids.end());
      const size_t off = size_t(first - ids.begin());
      for (int t = 0; t < T; ++t) {
        CHECK(b.inputs[size_t(s * T + t)] >= 65536);
        CHECK(b.targets[size_t(s * T + t)] == int32_t(ids[off + size_t(t) + 1]));
      }
    }
  }
}

TEST_CASE("corpus uint16: a file of 2-byte ids still loads the ids it holds") {
  const std::vector<uint32_t> ids = {0, 1, 255, 256, 0x1234, 65535, 40000, 7, 8, 9, 10};
  const std::string path = write_ids("small.u16", ids, 2);
  auto c = Corpus::load(path, "uint16", 65536, 4);
  REQUIRE_MESSAGE(c.ok(), c.error().message());
  CHECK(c->copy_tokens() == ids);
  // the same bytes read as bytes are the bytes
  auto bytes = Corpus::load(path, "bytes", 256, 4);
  REQUIRE(bytes.ok());
  CHECK(bytes->size() == 2 * ids.size());
  CHECK(bytes->token(8) == 0x34);
  CHECK(bytes->token(9) == 0x12);
}

TEST_CASE("corpus file: mapped, not read: copies share it, and it stays as loaded when a new file is renamed over it or it is removed") {
  const std::vector<uint32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  const std::string path = write_ids("mapped.u16", ids, 2);
  auto c = Corpus::load(path, "uint16", 10, 4);
  REQUIRE(c.ok());
  Corpus copy = *c;
  // `salamander data prepare` replaces a file by renaming a new one over it
  const std::string next = write_ids("next.u16", std::vector<uint32_t>(ids.size(), 7), 2);
  std::filesystem::rename(next, path);
  CHECK(c->copy_tokens() == ids);
  std::filesystem::remove(path);
  CHECK(copy.copy_tokens() == ids);
  // a batch reads windows of the ids as loaded: inputs ids[off, off + 4), targets one further
  Batch b = make_batch(copy, 1, 0, 0, 3, 4);
  for (int s = 0; s < 3; ++s) {
    bool found = false;
    for (size_t off = 0; off + 4 < ids.size() && !found; ++off) {
      found = true;
      for (size_t t = 0; t < 4; ++t)
        found = found && b.inputs[size_t(s) * 4 + t] == int32_t(ids[off + t]) &&
                b.targets[size_t(s) * 4 + t] == int32_t(ids[off + t + 1]);
    }
    CHECK(found);
  }
  auto empty = Corpus::load(write_text("empty.u16", ""), "uint16", 10, 4);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message().find("0 tokens, fewer than model.seq_len + 1 = 5") != std::string::npos);
  auto missing = Corpus::load(path, "uint16", 10, 4);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("does not exist") != std::string::npos);
}

TEST_CASE("corpus bytes: text bytes above 127 are ids 128 to 255") {
  const std::string path = write_text("text.txt", "caf\xc3\xa9 \xff end of text");
  auto c = Corpus::load(path, "bytes", 256, 4);
  REQUIRE(c.ok());
  CHECK(c->token(3) == 0xc3);
  CHECK(c->token(4) == 0xa9);
  CHECK(c->token(6) == 0xff);
}

TEST_CASE("corpus errors name the file and the rule: an id outside model.vocab, a partial id, a directory of ids") {
  const std::vector<uint32_t> ids = {1, 2, 3, 70000, 5, 6, 7, 8};
  const std::string path = write_ids("outside.u32", ids, 4);
  auto outside = Corpus::load(path, "uint32", 70000, 4);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().message() == "data.path " + path + ": token 70000 at 3 is outside model.vocab = 70000");
  CHECK(Corpus::load(path, "uint32", 70001, 4).ok());

  const std::string odd = write_text("odd.u32", std::string(10, 'a'));
  auto partial = Corpus::load(odd, "uint32", 1 << 20, 1);
  REQUIRE_FALSE(partial.ok());
  CHECK(partial.error().message() == "data.path " + odd + ": a uint32 token file holds 4 bytes per id, and its size "
                                                          "(10 bytes) is not a multiple of 4");
  const std::string odd16 = write_text("odd.u16", std::string(9, 'a'));
  CHECK(Corpus::load(odd16, "uint16", 1 << 20, 1).error().message().find("is not a multiple of 2") != std::string::npos);

  const std::string dir = std::filesystem::path(path).parent_path().string();
  auto directory = Corpus::load(dir, "uint32", 1 << 20, 1);
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().message().find("only data.format = \"bytes\" reads directories") != std::string::npos);

  auto few = Corpus::load(path, "uint32", 1 << 20, 8);  // 8 ids: fewer than seq_len + 1
  REQUIRE_FALSE(few.ok());
  CHECK(few.error().message().find("8 tokens, fewer than model.seq_len + 1 = 9") != std::string::npos);
}

TEST_CASE("corpus files: a directory's regular, non-hidden files in name order, a file itself") {
  const std::string dir = temp_path("files");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/sub");
  for (const char* n : {"b.txt", "a.txt", ".hidden", "sub/c.txt"}) std::ofstream(dir + "/" + n) << "x";
  std::filesystem::create_symlink(dir + "/a.txt", dir + "/link.txt");
  auto files = corpus_files(dir);
  REQUIRE(files.ok());
  CHECK(*files == std::vector<std::string>{dir + "/a.txt", dir + "/b.txt"});
  CHECK(*corpus_files(dir + "/b.txt") == std::vector<std::string>{dir + "/b.txt"});
  CHECK(corpus_files(dir + "/none").error().message() == dir + "/none does not exist");
  CHECK(is_text("plain"));
  CHECK_FALSE(is_text(std::string("a\0b", 3)));
}

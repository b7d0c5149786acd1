// test_documents.cpp — what `data prepare` reads and how it cuts it (engine/tokens/documents.h),
// without a tokenizer: the two document rules (a file's documents, concatenated, are the file),
// the encoder's chunks (never inside a character, after a newline where one is in reach), the UTF-8
// check, and which files of a directory are read, with the errors that name the file and the rule.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "tokens/documents.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::tokens;

namespace {

std::string joined(const std::vector<std::string_view>& parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

std::vector<std::string> strings(const std::vector<std::string_view>& parts) { return {parts.begin(), parts.end()}; }

std::string documents_dir(const std::string& name) {
  static const std::filesystem::path root = sal::test::temp_dir("documents");
  auto dir = root / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write_file_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("data documents: one per file, or one per block of lines with the blank lines after it") {
  const std::string text = "\n  \nfirst block\nstill first\n\n\t\nsecond\r\n \nthird, no newline";
  CHECK(strings(split_documents(text, DocumentRule::file)) == std::vector<std::string>{text});
  auto blocks = split_documents(text, DocumentRule::blank_lines);
  CHECK(strings(blocks) == std::vector<std::string>{"\n  \nfirst block\nstill first\n\n\t\n", "second\r\n \n",
                                                    "third, no newline"});
  CHECK(joined(blocks) == text);
  CHECK(strings(split_documents("one line\n", DocumentRule::blank_lines)) == std::vector<std::string>{"one line\n"});
  CHECK(strings(split_documents("\n\n\n", DocumentRule::blank_lines)) == std::vector<std::string>{"\n\n\n"});
  auto rule = parse_document_rule("paragraphs");
  REQUIRE_FALSE(rule.ok());
  CHECK(rule.error().message().find("--documents: 'paragraphs' is not a document rule") == 0);
  CHECK(*parse_document_rule("blank-lines") == DocumentRule::blank_lines);
  CHECK(std::string(rule_name(DocumentRule::file)) == "file");
}

TEST_CASE("data encoder chunks: at most the size, after a newline where one is in reach, never inside a character") {
  const std::string doc = "line one\nline two is longer\nx\n" + std::string(40, 'y') + "\xe6\x9d\xb1\xe4\xba\xac" +
                          " tail words here";
  for (size_t max : {4, 5, 7, 10, 16, 64, 1000}) {
    CAPTURE(max);
    auto chunks = encoder_chunks(doc, max);
    CHECK(joined(chunks) == doc);
    for (auto c : chunks) {
      CHECK(c.size() <= max);
      CHECK_FALSE(c.empty());
      CHECK_FALSE(invalid_utf8(c).has_value());  // whole characters only
    }
  }
  auto by16 = encoder_chunks(doc, 16);
  CHECK(by16[0] == "line one\n");  // the newline in reach, not 16 bytes
  CHECK(encoder_chunks(doc, 1000).size() == 1);  // a document that fits is seen whole
  CHECK(encoder_chunks("", 10).size() == 1);
}

TEST_CASE("data UTF-8 check: the first byte that is not part of a valid character") {
  CHECK_FALSE(invalid_utf8("plain ascii, \xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80").has_value());
  CHECK(invalid_utf8("ab\xc0\x80") == size_t(2));          // overlong
  CHECK(invalid_utf8("a\xed\xa0\x80") == size_t(1));       // a surrogate
  CHECK(invalid_utf8("\xf5\x80\x80\x80") == size_t(0));    // above U+10FFFF
  CHECK(invalid_utf8("abc\xe2\x82") == size_t(3));         // cut short
  CHECK(invalid_utf8("x\x80") == size_t(1));               // a lone continuation byte
  CHECK(invalid_utf8("latin-1 caf\xe9!") == size_t(11));
}

TEST_CASE("data input: a directory's text files in name order, binary and empty ones skipped, non-UTF-8 refused") {
  const std::string dir = documents_dir("input");
  write_file_text(dir + "/b.txt", "bee\n");
  write_file_text(dir + "/a.txt", "ay\n\nay again\n");
  write_file_text(dir + "/empty.txt", "");
  write_file_text(dir + "/index.dat", std::string("\x01\x00\x02", 3));
  write_file_text(dir + "/.hidden", "not read\n");
  std::filesystem::create_directories(dir + "/sub");
  write_file_text(dir + "/sub/c.txt", "not read either\n");
  auto in = scan_input(dir);
  REQUIRE_MESSAGE(in.ok(), in.error().message());
  REQUIRE(in->files.size() == 2);
  CHECK(in->files[0].path == dir + "/a.txt");
  CHECK(in->files[1].path == dir + "/b.txt");
  CHECK(in->files[0].bytes == 13);
  CHECK(in->bytes == 17);
  CHECK(in->skipped_binary == 1);
  CHECK(in->skipped_empty == 1);

  write_file_text(dir + "/c.txt", "caf\xe9\n");
  auto latin = scan_input(dir);
  REQUIRE_FALSE(latin.ok());
  CHECK(latin.error().message().find(dir + "/c.txt: not UTF-8 at byte 3") == 0);

  const std::string bare = documents_dir("bare");
  write_file_text(bare + "/x.bin", std::string("\0\0", 2));
  auto none = scan_input(bare);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message() == bare + ": no text files (read: the directory's regular, non-hidden files without a "
                                         "NUL byte, in name order; skipped 1 binary and 0 empty)");
  CHECK(scan_input(bare + "/x.bin").error().message() == bare + "/x.bin: not text (a NUL byte at 0)");
  write_file_text(bare + "/empty", "");
  CHECK(scan_input(bare + "/empty").error().message() == bare + "/empty is empty: no text to tokenise");
  CHECK(scan_input(bare + "/missing").error().message() == bare + "/missing does not exist");
}

// token_file.h — a token file and its two sidecars, as `salamander data prepare` writes them:
//
//   OUT       the ids, little-endian, 2 bytes each (uint16) or 4 (uint32): what a job reads with
//             data.path = OUT, data.format = "uint16" or "uint32". Documents follow each other with
//             nothing between them.
//   OUT.idx   where each document begins: little-endian uint64 token offsets, one per document, then
//             the total count: document d is ids [idx[d], idx[d + 1]). A document may be empty.
//   OUT.json  what the file is: {"format": "salamander-tokens", "version": 1, "tokens": OUT,
//             "index": OUT.idx, "dtype", "vocab" (ids are below it: model.vocab must be at least it),
//             "tokenizer" (the sentencepiece model, an absolute path), "trained" (whether data prepare
//             trained it), "token_count", "documents", "document_rule" (file | blank-lines), "input",
//             "bytes", "files": [{"path", "bytes", "first_document", "documents"}]}.
//
// Every file is written under a temporary name and renamed into place, the ids first, the
// description last: a description on disk means its ids and index are complete.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::tokens {

// "uint16" for a vocabulary of at most 65 536 ids, else "uint32".
std::string dtype_for(int vocab);
// Whether ids below `vocab` fit `dtype` ("uint16" or "uint32"); the error names both and the fix.
Status check_dtype(const std::string& dtype, int vocab);

struct SourceFile {
  std::string path;
  uint64_t bytes = 0, first_document = 0, documents = 0;
};

struct TokenFileInfo {
  std::string tokens, index;  // OUT, OUT.idx
  std::string dtype, tokenizer, document_rule, input;
  bool trained = false;
  int vocab = 0;
  uint64_t token_count = 0, documents = 0, bytes = 0;
  std::vector<SourceFile> files;
};

std::string index_path(const std::string& out);        // OUT.idx
std::string description_path(const std::string& out);  // OUT.json

// Writes OUT and its sidecars as the documents come.
class TokenWriter {
 public:
  static Result<TokenWriter> open(const std::string& out, const std::string& dtype, int vocab);
  TokenWriter(TokenWriter&&) = default;
  TokenWriter& operator=(TokenWriter&&) = default;
  ~TokenWriter();

  void begin_document();
  // Fails on an id >= vocab (naming it) or a write error.
  Status append(const std::vector<uint32_t>& ids);
  uint64_t tokens() const { return tokens_; }
  uint64_t documents() const { return starts_.size(); }
  // Renames the ids into place and writes the index and `info` (its paths, dtype, vocab and counts
  // filled in here).
  Result<TokenFileInfo> finish(TokenFileInfo info);

 private:
  TokenWriter() = default;
  std::string out_, temp_, dtype_;
  int vocab_ = 0;
  struct Close {
    void operator()(FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<FILE, Close> file_;
  std::vector<uint64_t> starts_;
  uint64_t tokens_ = 0;
};

// OUT.json read back, checked against the rules above.
Result<TokenFileInfo> read_description(const std::string& json_path);
// OUT.idx read back: documents + 1 offsets, rising, the first 0.
Result<std::vector<uint64_t>> read_index(const std::string& idx_path);

}  // namespace sal::tokens

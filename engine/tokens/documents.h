// documents.h — the text `salamander data prepare` reads, and the documents it is cut into.
//
// The input is a text file, or every text file of a directory, by the rule the bytes corpus reads
// (model::corpus_files): the directory's regular, non-hidden files in name order, no symlinks, no
// subdirectories; a directory's file holding a NUL byte is binary and skipped, an empty one too.
// Every file read must be UTF-8 (sentencepiece reads UTF-8): one that is not is an error naming the
// file and the byte, never silently mangled.
//
// Documents (the token file's index records where each begins):
//   file         each file is one document;
//   blank-lines  each block of non-blank lines is one, with the blank lines that follow it (blank
//                lines at the top of a file go with its first block). A blank line is empty or
//                holds only spaces, tabs and a carriage return.
// Either way a file's documents, concatenated, are the file: no byte is dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace sal::tokens {

enum class DocumentRule { file, blank_lines };
// "file" or "blank-lines"; the error lists both.
Result<DocumentRule> parse_document_rule(std::string_view name);
const char* rule_name(DocumentRule r);

struct InputFile {
  std::string path;
  uint64_t bytes = 0;
};

struct Input {
  std::vector<InputFile> files;  // the text files, in the order they are read
  uint64_t bytes = 0;            // all of them
  size_t skipped_binary = 0, skipped_empty = 0;  // a directory's files left out, and why
};

// The input's text files, each read once and checked. An input without text is an error that
// says what was looked for and what was skipped.
Result<Input> scan_input(const std::string& path);

// One file's text, checked again (it may have changed since the scan).
Result<std::string> read_text(const std::string& path);

// The byte offset of the first byte of `text` that does not belong to a valid UTF-8 character.
std::optional<size_t> invalid_utf8(std::string_view text);

// The documents of one file's text under the rule, in order; together they are the text.
std::vector<std::string_view> split_documents(std::string_view text, DocumentRule rule);

// A document cut for the encoder into pieces of at most `max_bytes` (at least 4): after a newline
// where one is in reach, else before a space, else at a character boundary. Documents that fit are
// one piece: the encoder sees them whole.
std::vector<std::string_view> encoder_chunks(std::string_view doc, size_t max_bytes);

}  // namespace sal::tokens

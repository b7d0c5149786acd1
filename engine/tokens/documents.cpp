// documents.cpp — see documents.h.
#include "tokens/documents.h"

#include "core/paths.h"
#include "model/data.h"

namespace sal::tokens {
namespace {

constexpr size_t kMaxFileBytes = size_t(2) << 30;  // the corpus's own limit on one file

// The length of the valid UTF-8 character at text[i], or 0 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
size_t utf8_char(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return i + k < text.size() ? uint8_t(text[i + k]) : uint8_t(0); };
  const auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) > 0x9F) return 0;  // a surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// The line starting at `at`, its newline included.
std::string_view line_at(std::string_view text, size_t at) {
  size_t nl = text.find('\n', at);
  return text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl + 1 - at);
}

// Where a chunk of at most `max_bytes` from `at` ends: after the last newline in reach, else before
// the last space, else at the last character boundary.
size_t chunk_end(std::string_view doc, size_t at, size_t max_bytes) {
  if (doc.size() - at <= max_bytes) return doc.size();
  const std::string_view reach = doc.substr(at, max_bytes);
  if (size_t nl = reach.rfind('\n'); nl != std::string_view::npos) return at + nl + 1;
  if (size_t sp = reach.rfind(' '); sp != std::string_view::npos && sp > 0) return at + sp;
  size_t end = at + max_bytes;
  while (end > at + 1 && (uint8_t(doc[end]) & 0xC0) == 0x80) --end;  // not inside a character
  return end;
}

}  // namespace

Result<DocumentRule> parse_document_rule(std::string_view name) {
  if (name == "file") return DocumentRule::file;
  if (name == "blank-lines") return DocumentRule::blank_lines;
  return fail("--documents: '", std::string(name), "' is not a document rule (file: a document per file, ",
              "blank-lines: a document per block of lines between blank lines)");
}

const char* rule_name(DocumentRule r) { return r == DocumentRule::file ? "file" : "blank-lines"; }

std::optional<size_t> invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_char(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

namespace {

// The rules a file read must meet: text, UTF-8.
Status check_text(const std::string& path, const std::string& text) {
  if (!model::is_text(text)) return fail(path, ": not text (a NUL byte at ", text.find('\0'), ")");
  if (auto bad = invalid_utf8(text))
    return fail(path, ": not UTF-8 at byte ", *bad, " (the tokenizer reads UTF-8 text: convert it, e.g. with iconv)");
  return {};
}

}  // namespace

Result<std::string> read_text(const std::string& path) {
  auto text = read_file(path, kMaxFileBytes);
  if (!text) return text.error();
  SAL_TRY(check_text(path, *text));
  return text;
}

Result<Input> scan_input(const std::string& path) {
  auto files = model::corpus_files(path);
  if (!files) return files.error();
  const bool one_file = files->size() == 1 && (*files)[0] == path;
  Input in;
  for (const auto& f : *files) {
    auto text = read_file(f, kMaxFileBytes);
    if (!text) return text.error();
    if (!one_file && !model::is_text(*text)) {
      ++in.skipped_binary;
      continue;
    }
    if (text->empty()) {
      ++in.skipped_empty;
      continue;
    }
    SAL_TRY(check_text(f, *text));
    in.files.push_back({f, text->size()});
    in.bytes += text->size();
  }
  if (one_file && in.files.empty()) return fail(path, " is empty: no text to tokenise");
  if (in.files.empty())
    return fail(path, ": no text files (read: the directory's regular, non-hidden files without a NUL byte, in name ",
                "order; skipped ", in.skipped_binary, " binary and ", in.skipped_empty, " empty)");
  return in;
}

std::vector<std::string_view> split_documents(std::string_view text, DocumentRule rule) {
  if (rule == DocumentRule::file || text.empty()) return {text};
  std::vector<std::string_view> docs;
  size_t begin = 0, at = 0;
  bool after_blank = false, seen_text = false;  // a blank line since the block's text; any text yet
  while (at < text.size()) {
    std::string_view line = line_at(text, at);
    if (blank(line)) {
      after_blank = seen_text;
    } else {
      if (after_blank) {  // a new block begins: the one before ends with its blank lines
        docs.push_back(text.substr(begin, at - begin));
        begin = at;
      }
      after_blank = false;
      seen_text = true;
    }
    at += line.size();
  }
  docs.push_back(text.substr(begin));
  return docs;
}

std::vector<std::string_view> encoder_chunks(std::string_view doc, size_t max_bytes) {
  if (max_bytes < 4) max_bytes = 4;  // room for any one character
  std::vector<std::string_view> out;
  for (size_t at = 0; at < doc.size();) {
    size_t end = chunk_end(doc, at, max_bytes);
    out.push_back(doc.substr(at, end - at));
    at = end;
  }
  if (out.empty()) out.push_back(doc);
  return out;
}

}  // namespace sal::tokens

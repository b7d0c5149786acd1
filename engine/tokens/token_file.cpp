// token_file.cpp — see token_file.h.
#include "tokens/token_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/paths.h"

namespace sal::tokens {
namespace {

constexpr uint64_t kUint16Ids = 65536;

std::string le_bytes(uint64_t v, size_t width) {
  std::string out(width, '\0');
  for (size_t b = 0; b < width; ++b) out[b] = char((v >> (8 * b)) & 0xff);
  return out;
}

// In the order token_file.h lists the keys.
nlohmann::ordered_json to_json(const TokenFileInfo& i) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& f : i.files)
    files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"first_document", f.first_document}, {"documents", f.documents}});
  return {{"format", "salamander-tokens"},
          {"version", 1},
          {"tokens", i.tokens},
          {"index", i.index},
          {"dtype", i.dtype},
          {"vocab", i.vocab},
          {"tokenizer", i.tokenizer},
          {"trained", i.trained},
          {"token_count", i.token_count},
          {"documents", i.documents},
          {"document_rule", i.document_rule},
          {"input", i.input},
          {"bytes", i.bytes},
          {"files", files}};
}

Result<TokenFileInfo> from_json(const nlohmann::json& j) {
  if (j.value("format", "") != "salamander-tokens" || j.value("version", 0) != 1)
    return fail("not a token file description (format \"salamander-tokens\", version 1)");
  TokenFileInfo i;
  auto text = [&](const char* key) { return j.at(key).get<std::string>(); };
  auto count = [&](const nlohmann::json& o, const char* key) { return o.at(key).get<uint64_t>(); };
  i.tokens = text("tokens");
  i.index = text("index");
  i.dtype = text("dtype");
  i.tokenizer = text("tokenizer");
  i.document_rule = text("document_rule");
  i.input = text("input");
  i.vocab = j.at("vocab").get<int>();
  i.trained = j.at("trained").get<bool>();
  i.token_count = count(j, "token_count");
  i.documents = count(j, "documents");
  i.bytes = count(j, "bytes");
  for (const auto& f : j.at("files"))
    i.files.push_back({f.at("path").get<std::string>(), count(f, "bytes"), count(f, "first_document"), count(f, "documents")});
  SAL_TRY(check_dtype(i.dtype, i.vocab));
  return i;
}

}  // namespace

std::string dtype_for(int vocab) { return uint64_t(vocab) <= kUint16Ids ? "uint16" : "uint32"; }

Status check_dtype(const std::string& dtype, int vocab) {
  if (dtype != "uint16" && dtype != "uint32") return fail("dtype '", dtype, "': expected uint16 or uint32");
  if (dtype == "uint16" && uint64_t(vocab) > kUint16Ids)
    return fail("dtype uint16 holds ids below 65536, and the tokenizer's vocabulary has ", vocab,
                " ids: use uint32 (or let the vocabulary choose)");
  return {};
}

std::string index_path(const std::string& out) { return out + ".idx"; }
std::string description_path(const std::string& out) { return out + ".json"; }

Result<TokenWriter> TokenWriter::open(const std::string& out, const std::string& dtype, int vocab) {
  SAL_TRY(check_dtype(dtype, vocab));
  TokenWriter w;
  w.out_ = out;
  w.temp_ = out + ".tmp." + std::to_string(::getpid());
  w.dtype_ = dtype;
  w.vocab_ = vocab;
  w.file_.reset(std::fopen(w.temp_.c_str(), "wb"));
  if (!w.file_) return fail("cannot create ", w.temp_, ": ", std::strerror(errno));
  return w;
}

TokenWriter::~TokenWriter() {
  if (file_) {  // not finished: leave nothing half written behind
    file_.reset();
    std::remove(temp_.c_str());
  }
}

void TokenWriter::begin_document() { starts_.push_back(tokens_); }

Status TokenWriter::append(const std::vector<uint32_t>& ids) {
  const size_t width = dtype_ == "uint16" ? 2 : 4;
  std::string bytes;
  bytes.reserve(ids.size() * width);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= uint32_t(vocab_))
      return fail(out_, ": id ", ids[i], " (token ", tokens_ + i, ") is outside the vocabulary of ", vocab_);
    bytes += le_bytes(ids[i], width);
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_.get()) != bytes.size())
    return fail("cannot write ", temp_, ": ", std::strerror(errno));
  tokens_ += ids.size();
  return {};
}

Result<TokenFileInfo> TokenWriter::finish(TokenFileInfo info) {
  FILE* f = file_.get();
  if (std::fflush(f) != 0 || ::fsync(fileno(f)) != 0) return fail("cannot write ", temp_, ": ", std::strerror(errno));
  file_.reset();
  if (std::rename(temp_.c_str(), out_.c_str()) != 0)
    return fail("cannot rename ", temp_, " to ", out_, ": ", std::strerror(errno));
  std::string idx;
  for (uint64_t s : starts_) idx += le_bytes(s, 8);
  idx += le_bytes(tokens_, 8);
  SAL_TRY(write_file(index_path(out_), idx));
  info.tokens = absolute_path(out_);
  info.index = absolute_path(index_path(out_));
  info.dtype = dtype_;
  info.vocab = vocab_;
  info.token_count = tokens_;
  info.documents = starts_.size();
  SAL_TRY(write_file(description_path(out_), json_text(to_json(info), 2) + "\n"));
  return info;
}

Result<TokenFileInfo> read_description(const std::string& json_path) {
  auto text = read_file(json_path);
  if (!text) return text.error();
  try {
    auto info = from_json(nlohmann::json::parse(*text));
    if (!info) return info.error().with_context(json_path);
    return info;
  } catch (const std::exception& e) {
    return fail(json_path, ": ", e.what());
  }
}

Result<std::vector<uint64_t>> read_index(const std::string& idx_path) {
  auto raw = read_file(idx_path, size_t(8) << 30);
  if (!raw) return raw.error();
  if (raw->size() % 8 || raw->empty())
    return fail(idx_path, ": ", raw->size(), " bytes, not a whole number (at least one) of uint64 offsets");
  std::vector<uint64_t> offsets(raw->size() / 8);
  for (size_t i = 0; i < offsets.size(); ++i)
    for (size_t b = 8; b-- > 0;) offsets[i] = (offsets[i] << 8) | uint8_t((*raw)[i * 8 + b]);
  if (offsets[0] != 0) return fail(idx_path, ": the first document begins at ", offsets[0], ", not 0");
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      return fail(idx_path, ": offset ", i, " (", offsets[i], ") is below the one before (", offsets[i - 1], ")");
  return offsets;
}

}  // namespace sal::tokens

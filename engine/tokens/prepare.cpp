// prepare.cpp — see prepare.h. Three passes over the input: a scan (what is read, and that it is
// UTF-8 text), the training's lines (with --train-vocab), and the encoding; one file is in memory at
// a time.
#include "tokens/prepare.h"

#include <filesystem>

#include "core/paths.h"
#include "tokens/tokenizer.h"

namespace sal::tokens {
namespace {

constexpr uint64_t kLinesPerReport = 4096;

// Tells `report` that a phase begins.
void announce(PrepareProgress& p, const char* phase, const ProgressFn& report) {
  p.phase = phase;
  p.begins = true;
  if (report) report(p);
  p.begins = false;
}

// Every non-empty line of the input's files, in order, for the trainer.
class FileLines : public LineSource {
 public:
  FileLines(const Input& in, PrepareProgress& p, const ProgressFn& report) : in_(in), p_(p), report_(report) {}

  Result<std::optional<std::string>> next() override {
    while (true) {
      if (at_ < text_.size()) {
        size_t nl = text_.find('\n', at_);
        size_t end = nl == std::string::npos ? text_.size() : nl;
        std::string line = text_.substr(at_, end - at_);
        at_ = end + 1;
        if (line.empty()) continue;
        if (++p_.lines % kLinesPerReport == 0 && report_) report_(p_);
        return std::optional<std::string>(std::move(line));
      }
      if (file_ > 0) p_.bytes_done += in_.files[file_ - 1].bytes, p_.files_done = file_;
      if (file_ == in_.files.size()) {
        announce(p_, "learning", report_);
        return std::optional<std::string>();
      }
      auto text = read_text(in_.files[file_++].path);
      if (!text) return text.error();
      text_ = std::move(*text);
      at_ = 0;
    }
  }

 private:
  const Input& in_;
  PrepareProgress& p_;
  const ProgressFn& report_;
  size_t file_ = 0;
  std::string text_;
  size_t at_ = 0;
};

// A path absolute and normal, without a trailing '/': one spelling per place.
std::string normal(const std::string& path) {
  auto p = std::filesystem::path(absolute_path(path)).lexically_normal();
  return p.has_filename() ? p.string() : p.parent_path().string();
}

Status check_options(const PrepareOptions& o) {
  if (o.out.empty()) return fail("--out FILE is required: where the token file goes");
  if (o.model.empty() == (o.train_vocab == 0))
    return fail("give either --model SPM.model (a sentencepiece model to use) or --train-vocab N (train one of N pieces)");
  if (!o.dtype.empty() && o.dtype != "uint16" && o.dtype != "uint32")
    return fail("--dtype: '", o.dtype, "': expected uint16 or uint32");
  const std::string in = normal(o.input), out = normal(o.out);
  if (out == in) return fail("--out ", o.out, " is the input itself");
  if (dir_name(out) == in)
    return fail("--out ", o.out, " is inside the input directory ", o.input,
                ": the next run would read its outputs (the .json description) as text; write it elsewhere");
  return {};
}

// The tokenizer: the one brought, or one trained on the input and written to OUT.model.
Result<Tokenizer> tokenizer_for(const PrepareOptions& o, const Input& in, PrepareProgress& p, const ProgressFn& report,
                                TokenFileInfo& info) {
  if (!o.model.empty()) {
    info.tokenizer = absolute_path(o.model);
    return Tokenizer::load(o.model);
  }
  announce(p, "reading", report);
  FileLines lines(in, p, report);
  TrainOptions train{o.train_vocab, o.model_type, o.seed};
  train.normalization = o.normalization;
  auto model = train_model(lines, train);
  if (!model) return model.error().with_context("--train-vocab " + std::to_string(o.train_vocab));
  const std::string path = trained_model_path(o.out);
  SAL_TRY(write_file(path, *model));
  info.tokenizer = absolute_path(path);
  info.trained = true;
  return Tokenizer::from_bytes(*model, path);
}

// One file's documents, encoded into the writer.
Status encode_file(const Tokenizer& t, const PrepareOptions& o, const InputFile& f, TokenWriter& w, SourceFile& src,
                   PrepareProgress& p, const ProgressFn& report) {
  auto text = read_text(f.path);
  if (!text) return text.error();
  src = {f.path, text->size(), w.documents(), 0};
  for (std::string_view doc : split_documents(*text, o.documents)) {
    w.begin_document();
    ++src.documents;
    for (std::string_view chunk : encoder_chunks(doc, o.chunk_bytes)) {
      auto ids = t.encode(chunk);
      if (!ids) return ids.error().with_context(f.path);
      SAL_TRY(w.append(*ids));
      p.tokens = w.tokens();
      p.bytes_done += chunk.size();
      if (report) report(p);
    }
  }
  return {};
}

}  // namespace

std::string trained_model_path(const std::string& out) { return out + ".model"; }

Result<TokenFileInfo> prepare(const PrepareOptions& o, const ProgressFn& report) {
  SAL_TRY(check_options(o));
  auto in = scan_input(o.input);
  if (!in) return in.error();
  PrepareProgress p;
  p.files = in->files.size();
  p.bytes = in->bytes;
  TokenFileInfo info;
  info.input = absolute_path(o.input);
  info.document_rule = rule_name(o.documents);
  info.bytes = in->bytes;
  auto tok = tokenizer_for(o, *in, p, report, info);
  if (!tok) return tok.error();
  const std::string dtype = o.dtype.empty() ? dtype_for(tok->vocab()) : o.dtype;
  if (auto s = check_dtype(dtype, tok->vocab()); !s) return s.error().with_context("--dtype");
  auto w = TokenWriter::open(o.out, dtype, tok->vocab());
  if (!w) return w.error();
  p = {"encoding", false, 0, in->files.size(), 0, in->bytes, p.lines, 0};
  for (const auto& f : in->files) {
    info.files.emplace_back();
    SAL_TRY(encode_file(*tok, o, f, *w, info.files.back(), p, report));
    ++p.files_done;
  }
  if (w->tokens() == 0) return fail(o.input, ": the tokenizer made no tokens of its text");
  return w->finish(std::move(info));
}

}  // namespace sal::tokens

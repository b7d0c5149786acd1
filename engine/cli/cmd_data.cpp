// cmd_data.cpp — `salamander data prepare INPUT --out FILE (--model SPM.model | --train-vocab N)`:
// text into a token file a job trains on (engine/tokens/prepare.h does the work). Progress goes to
// stderr once the work has taken a second; the summary, and the job-file lines that read the
// result, go to stdout.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "core/clock.h"
#include "tokens/prepare.h"
#include "tokens/tokenizer.h"

namespace sal::cli {
namespace {

constexpr int64_t kQuietNs = 1'000'000'000;  // no progress line for work shorter than this
constexpr uint64_t kManyLines = 100'000;     // a training on this many lines may take a while

// The command line as prepare() takes it; a usage error names the option.
Result<tokens::PrepareOptions> prepare_options(const Parsed& p) {
  tokens::PrepareOptions o;
  o.input = p.positional[0];
  o.out = p.get_or("--out", "");
  o.model = p.get_or("--model", "");
  auto vocab = p.get_int("--train-vocab", 0, 1, 1 << 20);
  auto seed = p.get_int("--seed", 1, 0, UINT32_MAX - 1);
  for (auto* r : {&vocab, &seed})
    if (!*r) return r->error();
  o.train_vocab = int(*vocab);
  if (o.model.empty() == (o.train_vocab == 0))
    return fail("give either --model SPM.model (a sentencepiece model to use) or --train-vocab N (train one of N pieces)");
  if (o.train_vocab && o.train_vocab < tokens::kMinTrainVocab)
    return fail("--train-vocab ", o.train_vocab, " is too small: byte fallback takes 256 pieces and <unk>, <s>, </s> ",
                "three more, so at least ", tokens::kMinTrainVocab);
  if (o.out.empty()) return fail("--out FILE is required: where the token file goes");
  o.seed = uint32_t(*seed);
  o.model_type = p.get_or("--model-type", "bpe");
  if (o.model_type != "bpe" && o.model_type != "unigram")
    return fail("--model-type: '", o.model_type, "' is not a model type (bpe, unigram)");
  if (p.has("--model-type") && o.train_vocab == 0) return fail("--model-type goes with --train-vocab");
  o.normalization = p.get_or("--normalize", "identity");
  if (!tokens::known_normalization(o.normalization))
    return fail("--normalize: '", o.normalization, "' is not a rule (identity, nfkc, nmt_nfkc, nfkc_cf)");
  if (p.has("--normalize") && o.train_vocab == 0)
    return fail("--normalize goes with --train-vocab (a brought model normalises as it was trained to)");
  o.dtype = p.get_or("--dtype", "");
  auto rule = tokens::parse_document_rule(p.get_or("--documents", "file"));
  if (!rule) return rule.error();
  o.documents = *rule;
  return o;
}

std::string size_text(uint64_t bytes) {
  char text[32];
  if (bytes < 1'000'000) std::snprintf(text, sizeof text, "%.1f kB", double(bytes) / 1e3);
  else std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  return text;
}

// "encoding: 3/12 files, 14.2 MB of 51.0 MB, 3100000 tokens"; the training reads lines, then learns.
std::string progress_text(const tokens::PrepareProgress& p) {
  const std::string phase = p.phase;
  if (phase == "learning")
    return "learning: sentencepiece's trainer is choosing the vocabulary from " + std::to_string(p.lines) + " lines";
  std::string out = phase + ": " + std::to_string(p.files_done) + "/" + std::to_string(p.files) + " files, " +
                    size_text(p.bytes_done) + " of " + size_text(p.bytes);
  if (phase == "reading") return out + ", " + std::to_string(p.lines) + " lines for the training";
  return out + ", " + std::to_string(p.tokens) + " tokens";
}

void print_summary(const tokens::TokenFileInfo& i, const tokens::PrepareOptions& o) {
  std::printf("wrote %s: %llu tokens (%s) in %llu documents (one per %s) from %zu files, %s\n", o.out.c_str(),
              (unsigned long long)i.token_count, i.dtype.c_str(), (unsigned long long)i.documents,
              i.document_rule == "file" ? "file" : "block of lines", i.files.size(), size_text(i.bytes).c_str());
  std::printf("index %s, description %s\n", tokens::index_path(o.out).c_str(), tokens::description_path(o.out).c_str());
  std::printf("tokenizer %s (%s, %d pieces)\n", i.tokenizer.c_str(), i.trained ? "trained here" : "brought", i.vocab);
  std::printf("in a job: data = { path = '%s', format = '%s', tokenizer = '%s' }, model = { vocab = %d, ... }\n",
              i.tokens.c_str(), i.dtype.c_str(), i.tokenizer.c_str(), i.vocab);
}

}  // namespace

int cmd_data_prepare(const Command& cmd, const Parsed& p) {
  auto o = prepare_options(p);
  if (!o) return usage_error(cmd, o.error().message());
  if (auto s = tokens::check_available(); !s) {
    std::fprintf(stderr, "salamander data prepare: %s\n", s.error().message().c_str());
    return 1;
  }
  ProgressLine line(stderr);
  const int64_t start = mono_ns();
  bool shown = false;
  auto report = [&](const tokens::PrepareProgress& pr) {
    // the trainer then works without a word: say so when it starts, unless its input is small
    const bool learning = pr.begins && std::string(pr.phase) == "learning" && pr.lines >= kManyLines;
    if (!learning && mono_ns() - start < kQuietNs) return;
    line.update(progress_text(pr), pr.begins);
    shown = true;
  };
  auto done = tokens::prepare(*o, report);
  if (shown) line.finish();
  if (!done) {
    std::fprintf(stderr, "salamander data prepare: %s\n", done.error().message().c_str());
    return 1;
  }
  print_summary(*done, *o);
  return 0;
}

}  // namespace sal::cli

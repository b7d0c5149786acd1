// tokenizer.h — a sentencepiece tokenizer (Debian's libsentencepiece): a model file loaded, text
// encoded to token ids and ids decoded back to text, and a new model trained on lines of text.
// `salamander data prepare` makes token files with it and `salamander sample` reads and writes text
// through it. The models this engine trains (train_model) encode without loss unless asked to
// normalise: identity normalisation, whitespace kept as it is, no dummy prefix, and byte fallback
// (a character outside the vocabulary becomes its UTF-8 bytes), so decode(encode(text)) == text for
// any UTF-8 text. The
// one character sentencepiece itself would not give back, its space mark U+2581 (which it decodes
// as a space), is encoded here as its three byte pieces, which decode as written. A model brought
// from elsewhere encodes as it was trained to (it may normalise, or add a dummy prefix).
//
// sentencepiece itself lives in a module loaded when first needed (spm_api.h says why). A build
// without libsentencepiece has no module: available() is false and every call fails, saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokens/spm_api.h"

namespace sal::tokens {

// Whether the sentencepiece module loads; check_available() is the error that says why not.
bool available();
Status check_available();

class Tokenizer {
 public:
  // A model file (a sentencepiece .model); the error names the file and why it is not one.
  static Result<Tokenizer> load(const std::string& path);
  // A model held in memory (what train_model returns); `described` names it in errors.
  static Result<Tokenizer> from_bytes(const std::string& model, const std::string& described);

  // The number of pieces: every id encode() gives is below it.
  int vocab() const;
  Result<std::vector<uint32_t>> encode(std::string_view text) const;
  // Fails on an id >= vocab() (naming it and its position).
  Result<std::string> decode(const std::vector<uint32_t>& ids) const;
  // Where it was loaded from (or its description).
  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const SpmModel> model_;
  std::string source_;
};

// Where train_model reads its lines: next() gives one line of text (without its newline), nullopt
// at the end, or an error that stops the training with it.
class LineSource {
 public:
  virtual ~LineSource() = default;
  virtual Result<std::optional<std::string>> next() = 0;
};

struct TrainOptions {
  int vocab = 0;                    // pieces, byte and special pieces included
  std::string model_type = "bpe";   // bpe | unigram
  uint32_t seed = 1;                // sentencepiece's generator (its sampling of lines)
  uint64_t max_lines = 2'000'000;   // more lines are sampled down to this many (seeded)
  // sentencepiece's normalisation rule: identity (lossless, the default), or nfkc, nmt_nfkc,
  // nfkc_cf (Unicode NFKC; nmt_ also folds control and space characters; _cf also folds case).
  // With any but identity, decode(encode(text)) is the normalised text.
  std::string normalization = "identity";
};

// Whether `rule` is a normalisation rule train_model takes.
bool known_normalization(const std::string& rule);

// The smallest vocabulary train_model accepts: 3 special pieces (<unk>, <s>, </s>), 256 byte
// pieces and at least one piece learned from the text. sentencepiece may ask for more: every
// character the text uses often enough needs a piece of its own.
constexpr int kMinTrainVocab = 260;

// Trains a model on `lines` (sentencepiece's trainer, one thread, deterministic for the same lines,
// options and seed) and returns it serialised, as a .model file holds it.
Result<std::string> train_model(LineSource& lines, const TrainOptions& o);

}  // namespace sal::tokens

// spm_module.cpp — libsalamander_spm.so, the engine's sentencepiece module (spm_api.h says why it
// is a module): a model loaded from its bytes, encoding and decoding (tokenizer.h's rules: U+2581
// encoded as its byte pieces), and the trainer. sentencepiece's statuses become Errors here; its
// trainer's informational log is silenced (its warnings still reach stderr). Header-only engine code
// only (core/result.h): the module links libsentencepiece and nothing of the engine.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "tokens/spm_api.h"
#include "tokens/tokenizer.h"

namespace sal::tokens {

namespace spm = sentencepiece;

namespace {

constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // U+2581, sentencepiece's mark for a space

Error error_of(const spm::util::Status& s) { return Error(s.ToString()); }

// The byte pieces of U+2581 ("<0xE2>", "<0x96>", "<0x81>"), if the model has them all and adds no
// dummy prefix (else encoding the text around a mark apart would add spaces): empty otherwise.
std::vector<uint32_t> space_mark_bytes(const spm::SentencePieceProcessor& sp) {
  std::vector<int> probe;
  if (!sp.Encode("x", &probe).ok() || probe.empty() || sp.IdToPiece(probe[0]).rfind(kSpaceMark, 0) == 0) return {};
  std::vector<uint32_t> ids;
  for (const char* piece : {"<0xE2>", "<0x96>", "<0x81>"}) {
    int id = sp.PieceToId(piece);
    if (!sp.IsByte(id)) return {};
    ids.push_back(uint32_t(id));
  }
  return ids;
}

// A trainer's error as a user reads it: sentencepiece's source position and failed condition
// ("Internal: ./src/trainer_interface.cc(580) [...] ") cut, and what the two errors a vocabulary
// size meets mean here.
Error trainer_error(const spm::util::Status& s) {
  std::string m = s.message();
  if (auto cut = m.find(") ["); cut != std::string::npos && m.find("] ", cut) != std::string::npos)
    m = m.substr(m.find("] ", cut) + 2);
  if (m.find("smaller than required_chars") != std::string::npos)
    m += " (here: every character that is not rare in the text needs a piece of its own beside the 259 byte and "
         "special pieces; give a larger vocabulary)";
  else if (m.find("Vocabulary size too high") != std::string::npos)
    m += " (here: the text has too few distinct pieces for so large a vocabulary; give a smaller one or more text)";
  return Error(m);
}

// A LineSource as sentencepiece's trainer reads sentences; an error of the source is kept whole
// (the trainer sees it only as a failed status).
class Lines : public spm::SentenceIterator {
 public:
  explicit Lines(LineSource& source) : source_(source) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    auto line = source_.next();
    if (!line) {
      error = line.error();
      done_ = true;
    } else if (!*line) {
      done_ = true;
    } else {
      line_ = std::move(**line);
    }
  }
  const std::string& value() const override { return line_; }
  spm::util::Status status() const override {
    if (!error) return spm::util::Status();
    return spm::util::Status(spm::util::StatusCode::kInternal, error->message());
  }

  std::optional<Error> error;

 private:
  LineSource& source_;
  std::string line_;
  bool done_ = false;
};

// The trainer's settings: lossless encoding but for the normalisation asked for (tokenizer.h), one
// thread, informational log off.
std::unordered_map<std::string, std::string> trainer_args(const TrainOptions& o) {
  return {{"model_type", o.model_type},
          {"vocab_size", std::to_string(o.vocab)},
          {"byte_fallback", "true"},
          {"normalization_rule_name", o.normalization},
          {"remove_extra_whitespaces", "false"},
          {"add_dummy_prefix", "false"},
          {"allow_whitespace_only_pieces", "true"},
          {"max_sentence_length", "16384"},
          {"input_sentence_size", std::to_string(o.max_lines)},
          {"shuffle_input_sentence", "true"},
          {"num_threads", "1"},
          {"minloglevel", "1"}};
}

// A model loaded, with the byte pieces its space mark is encoded as.
class Model : public SpmModel {
 public:
  explicit Model(std::string source) : source_(std::move(source)) {}

  static Result<std::shared_ptr<const SpmModel>> from_bytes(const std::string& model, const std::string& described) {
    auto m = std::make_shared<Model>(described);
    if (auto s = m->sp_.LoadFromSerializedProto(model); !s.ok())
      return fail(described, ": not a sentencepiece model (", s.ToString(), ")");
    if (m->sp_.GetPieceSize() <= 0) return fail(described, ": a sentencepiece model without pieces");
    m->mark_bytes_ = space_mark_bytes(m->sp_);
    return std::shared_ptr<const SpmModel>(std::move(m));
  }

  int vocab() const override { return sp_.GetPieceSize(); }

  // Text around each U+2581 encoded apart, the mark itself as its bytes (see tokenizer.h).
  Result<std::vector<uint32_t>> encode(std::string_view text) const override {
    if (mark_bytes_.empty() || text.find(kSpaceMark) == std::string_view::npos) return encode_plain(text);
    std::vector<uint32_t> out;
    for (size_t at = 0; at <= text.size();) {
      size_t mark = std::min(text.find(kSpaceMark, at), text.size());
      if (mark > at) {
        auto part = encode_plain(text.substr(at, mark - at));
        if (!part) return part.error();
        out.insert(out.end(), part->begin(), part->end());
      }
      if (mark == text.size()) break;
      out.insert(out.end(), mark_bytes_.begin(), mark_bytes_.end());
      at = mark + kSpaceMark.size();
    }
    return out;
  }

  Result<std::string> decode(const std::vector<uint32_t>& ids) const override {
    std::vector<int> in(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= uint32_t(vocab()))
        return fail(source_, ": id ", ids[i], " at ", i, " is outside the tokenizer's ", vocab(), " pieces");
      in[i] = int(ids[i]);
    }
    std::string text;
    if (auto s = sp_.Decode(in, &text); !s.ok()) return error_of(s).with_context(source_ + ": decoding");
    return text;
  }

 private:
  Result<std::vector<uint32_t>> encode_plain(std::string_view text) const {
    std::vector<int> ids;
    if (auto s = sp_.Encode(text, &ids); !s.ok()) return error_of(s).with_context(source_ + ": encoding");
    return std::vector<uint32_t>(ids.begin(), ids.end());
  }

  spm::SentencePieceProcessor sp_;
  std::string source_;
  std::vector<uint32_t> mark_bytes_;  // U+2581's byte pieces, when the model has them and no dummy prefix
};

Result<std::string> train(LineSource& lines, const TrainOptions& o) {
  if (o.vocab < kMinTrainVocab)
    return fail("a vocabulary of ", o.vocab, " is too small: byte fallback takes 256 pieces and <unk>, <s>, </s> three "
                "more, so at least ", kMinTrainVocab);
  if (o.model_type != "bpe" && o.model_type != "unigram")
    return fail("model type '", o.model_type, "': expected bpe or unigram");
  spm::SetRandomGeneratorSeed(o.seed);
  Lines it(lines);
  std::string model;
  auto s = spm::SentencePieceTrainer::Train(trainer_args(o), &it, &model);
  if (it.error) return *it.error;
  if (!s.ok()) return trainer_error(s).with_context("sentencepiece's trainer");
  return model;
}

}  // namespace

}  // namespace sal::tokens

// The module's one entry point (spm_api.h).
extern "C" __attribute__((visibility("default"))) const sal::tokens::SpmApi* salamander_spm_api() {
  static const sal::tokens::SpmApi api{sal::tokens::kSpmApiVersion, &sal::tokens::Model::from_bytes,
                                       &sal::tokens::train};
  return &api;
}

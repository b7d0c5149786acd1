// prepare.h — `salamander data prepare`: text in (documents.h's rule), a token file out
// (token_file.h), through a sentencepiece tokenizer brought as a model file or trained here on the
// input's lines (written next to the output as OUT.model). The ids are uint16 when the vocabulary
// has at most 65 536 of them, else uint32, unless a dtype is asked for (and fits). Documents larger
// than the encoder's chunk are encoded in pieces cut at line ends (documents.h, encoder_chunks):
// exact for the models train_model makes; a brought model with a dummy prefix puts its '▁' before
// each piece.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/result.h"
#include "tokens/documents.h"
#include "tokens/token_file.h"

namespace sal::tokens {

struct PrepareOptions {
  std::string input;          // a text file or a directory of them
  std::string out;            // the token file
  std::string model;          // a sentencepiece model to use, or
  int train_vocab = 0;        // the vocabulary of one to train (written to OUT.model)
  std::string model_type = "bpe";  // of the one trained: bpe | unigram
  std::string normalization = "identity";  // of the one trained (TrainOptions::normalization)
  uint32_t seed = 1;          // of the training's sampling of lines
  std::string dtype;          // "" (from the vocabulary), "uint16" or "uint32"
  DocumentRule documents = DocumentRule::file;
  size_t chunk_bytes = size_t(1) << 20;  // the most the encoder is given at once
};

// Where the work is, for a progress line.
struct PrepareProgress {
  const char* phase = "";     // "reading" (the training's lines), "learning" (the trainer at work), "encoding"
  bool begins = false;        // the phase begins now: worth showing at once
  size_t files_done = 0, files = 0;
  uint64_t bytes_done = 0, bytes = 0;
  uint64_t lines = 0;         // read for training
  uint64_t tokens = 0;        // written
};
using ProgressFn = std::function<void(const PrepareProgress&)>;

// OUT.model's path for a trained tokenizer.
std::string trained_model_path(const std::string& out);

// Does it all; `progress` is called often (it decides what to show). The error names the file and
// the rule broken.
Result<TokenFileInfo> prepare(const PrepareOptions& o, const ProgressFn& progress = {});

}  // namespace sal::tokens

// data.h — training data: a corpus of tokens, and the batch of each step.
//
// A corpus is byte-level text (vocab 256: a file, or every text file of a directory in name order,
// skipping symlinks and binary files such as fortune's .dat indexes) or a pre-tokenised file of
// little-endian uint16 or uint32 token ids (`salamander data prepare` writes both from text). A
// file is mapped, not read (core/mapped_file.h): every worker of a machine shares its pages, a
// step reads only its sequences' tokens, and its size is bounded by the address space, not by
// memory; a directory's text files are read and concatenated (at most 2 GiB each). The global
// batch of step s is a pure function of (seed, s): sequence i starts at an offset drawn from
// hash(seed, s, i). A worker computes only the sequences the plan gives it, and the global batch
// is the same whoever computes it — membership never changes it.
//
// A validation split (data.validation = f) holds out the corpus's last f of tokens: training
// batches are drawn from the rest, and the validation set is a fixed list of sequences in the part
// held out, sequence i at an offset drawn from hash(seed, i) — the same for every step, so the same
// weights give the same validation loss whoever computes it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/result.h"

namespace sal::model {

class RoutingTrace;

// The files a text corpus reads at `path`: the path itself when it is a file, else the regular,
// non-hidden files of the directory (no symlinks, no subdirectories) in name order. Which of a
// directory's files are text is decided by their contents (is_text): the others are skipped.
Result<std::vector<std::string>> corpus_files(const std::string& path);
// Text, as a corpus reads it: no NUL byte.
bool is_text(const std::string& data);

class Corpus {
 public:
  // format: "bytes", "uint16" or "uint32" (little-endian ids). Every token must be < vocab (each is
  // checked once, here). Needs at least seq_len + 1 tokens.
  static Result<Corpus> load(const std::string& path, const std::string& format, int vocab, int seq_len);
  // A corpus from tokens in memory (tests).
  static Corpus from_tokens(std::vector<uint32_t> tokens, std::string description);

  size_t size() const { return size_; }
  // Token i < size().
  uint32_t token(size_t i) const {
    if (width_ == 0) return owned_[i];
    const unsigned char* p = file_->data() + i * width_;
    uint32_t v = p[0];
    for (size_t b = 1; b < width_; ++b) v |= uint32_t(p[b]) << (8 * b);
    return v;
  }
  // Holds out the last `fraction` of the tokens for validation (0: none). Both parts must hold a
  // sequence of seq_len + 1 tokens.
  Status hold_out(double fraction, int seq_len);
  // Tokens [first, first + count) copied out (count clipped at the end).
  std::vector<uint32_t> copy_tokens(size_t first = 0, size_t count = SIZE_MAX) const;
  size_t train_size() const { return train_end_ ? train_end_ : size_; }
  size_t validation_size() const { return train_end_ ? size_ - train_end_ : 0; }
  const std::string& description() const { return description_; }

 private:
  // The first token >= vocab, if any (its index), for load()'s check.
  std::optional<size_t> first_outside(uint32_t vocab) const;

  std::vector<uint32_t> owned_;               // a directory's text, or tokens given (width_ 0)
  std::shared_ptr<const MappedFile> file_;    // a file of ids, width_ bytes each, little-endian
  size_t width_ = 0;
  size_t size_ = 0;
  std::string description_;
  size_t train_end_ = 0;  // tokens [train_end_, size) are held out (0: none)
};

struct Batch {
  int sequences = 0, seq_len = 0;
  std::vector<int32_t> inputs;   // [sequences * seq_len]
  std::vector<int32_t> targets;  // inputs shifted by one
  // How the step's work is divided among the plan's ranks, in thousandths of an even part per rank
  // (the health policy's shares; empty: even): the global batch's sequences were split so, and the
  // experts' tokens are dispatched so (runtime/dispatch.h's weights).
  std::vector<uint32_t> rank_shares;
  // Where the batch sits: its step and its first sequence's index in the global batch (make_batch
  // sets both); replayed routing (routing_trace.h) places each token by them.
  uint64_t step = 0;
  int first = 0;
  const RoutingTrace* routing = nullptr;  // model.routing_trace, or null (the gate routes)
  // The share of the global batch this pass's routing statistics cover (Model::set_aux_share):
  // 1, or a micro-batch's (runtime/micro_batches.h).
  double aux_share = 1.0;
};

// Sequences [first, first + count) of step `step`'s global batch.
Batch make_batch(const Corpus& c, uint64_t seed, uint64_t step, int first, int count, int seq_len);
// Sequences [first, first + count) of the validation set (the part held out; empty without one).
Batch make_validation_batch(const Corpus& c, uint64_t seed, int first, int count, int seq_len);

// The sequences of a global batch of `global` that rank `rank` of `ranks` takes: a contiguous
// share, the first (global mod ranks) ranks taking one more.
std::pair<int, int> batch_share(int global, int ranks, int rank);
// The same with each rank's share weighted (`shares`, one per rank, in thousandths of an even part:
// the health policy's; empty: even): contiguous, in rank order, every rank at least one sequence
// while the batch has as many (core/apportion.h).
std::pair<int, int> batch_share(int global, const std::vector<uint32_t>& shares, int ranks, int rank);

}  // namespace sal::model

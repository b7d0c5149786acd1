// sample.h — generating bytes from a trained model held whole in one process (a checkpoint loaded
// with load_all): each next token is drawn from softmax(logits / temperature) with a seeded
// generator, over a sliding context of the model's seq_len. temperature 0 takes the most likely
// token. Byte-level models only (vocab 256): the output is the prompt's continuation as text.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "model/params.h"

namespace sal::model {

struct SampleOptions {
  std::string prompt = "\n";
  int bytes = 200;
  double temperature = 0.8;
  uint64_t seed = 1;
};

// The `bytes` generated after the prompt (the prompt itself not included).
Result<std::string> sample_bytes(Params& p, const SampleOptions& o);

// Mean cross-entropy (nats per byte) of the model on `text`, in windows of seq_len: how well it
// predicts a text (used to compare a trained model against an untrained one).
Result<double> text_loss(Params& p, const std::string& text);

}  // namespace sal::model

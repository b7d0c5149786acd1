// sample.h — generating tokens from a trained model held whole in one process (a checkpoint loaded
// with load_all): each next token is drawn from softmax(logits / temperature) with a seeded
// generator, over a sliding context of the model's seq_len. temperature 0 takes the most likely
// token. sample_bytes is the byte-level case (vocab 256): the output is the prompt's continuation
// as text; a model of token ids samples ids (sample_ids) that its tokenizer turns into text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// `count` ids generated after the `prompt` ids (o.prompt and o.bytes unused), each drawn among the
// ids below `limit` (0: the whole vocabulary; a tokenizer may have fewer pieces than the model ids).
Result<std::vector<int32_t>> sample_ids(Params& p, std::vector<int32_t> prompt, int count, const SampleOptions& o,
                                        int limit = 0);

// Mean cross-entropy (nats per byte) of the model on `text`, in windows of seq_len: how well it
// predicts a text (used to compare a trained model against an untrained one).
Result<double> text_loss(Params& p, const std::string& text);
// The same for token ids (nats per token).
Result<double> ids_loss(Params& p, const std::vector<int32_t>& ids);

}  // namespace sal::model

// cmd_sample.cpp — `salamander sample --checkpoint DIR`: loads a dense checkpoint (the one a run
// leaves in <run>/checkpoint, a complete snapshot, or a run directory's newest) into this process
// and prints the model's continuation of a prompt — or, with --logits, the logits of given token ids
// as JSON (what an exported copy of the model must reproduce; tests/ckpt/torch_export.py checks it).
// A model of token ids samples through its sentencepiece tokenizer (--tokenizer, else the
// data.tokenizer of the job its run's journal recorded); a byte-level model reads and writes bytes.
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/resume_job.h"
#include "ckpt/format.h"
#include "core/paths.h"
#include "core/strings.h"
#include "model/local_exchange.h"
#include "model/model.h"
#include "model/sample.h"
#include "tokens/tokenizer.h"

namespace sal::cli {
namespace {

int fail_with(const Error& e) {
  std::fprintf(stderr, "%s\n", e.message().c_str());
  return 1;
}

// --logits "1,2,3;4,5,6": sequences of token ids, all of one length.
Result<std::vector<std::vector<int32_t>>> token_sequences(const std::string& text) {
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& part : split(text, ';')) {
    std::vector<int32_t> ids;
    for (const auto& word : split(part, ',')) {
      auto id = parse_int(trim(word));
      if (!id || *id < 0 || *id > INT32_MAX) return fail("--logits: '", word, "' is not a token id");
      ids.push_back(int32_t(*id));
    }
    if (ids.empty()) return fail("--logits: an empty sequence (give token ids like 72,105;33,10)");
    if (!seqs.empty() && ids.size() != seqs[0].size())
      return fail("--logits: every sequence needs the same length (", seqs[0].size(), " tokens), got ", ids.size());
    seqs.push_back(std::move(ids));
  }
  return seqs;
}

// Prints {"checkpoint", "step", "tokens": [[...]], "logits": [[[V floats] per position] per sequence]}.
int print_logits(model::Params& params, const std::string& dir, uint64_t step, const std::string& ids) {
  auto seqs = token_sequences(ids);
  if (!seqs) return fail_with(seqs.error());
  const int B = int(seqs->size()), T = int((*seqs)[0].size()), V = params.dims.vocab;
  std::vector<int32_t> flat;
  for (const auto& s : *seqs) flat.insert(flat.end(), s.begin(), s.end());
  auto m = model::make_model(params);
  model::LocalExchange ex(params);
  auto logits = m->logits(flat, B, T, ex);
  if (!logits) return fail_with(logits.error().with_context("--logits"));
  nlohmann::json out{{"checkpoint", dir}, {"step", step}, {"tokens", *seqs}, {"logits", nlohmann::json::array()}};
  for (int b = 0; b < B; ++b) {
    nlohmann::json rows = nlohmann::json::array();
    for (int t = 0; t < T; ++t) {
      auto row = logits->begin() + (long(b) * T + t) * V;
      rows.push_back(std::vector<float>(row, row + V));
    }
    out["logits"].push_back(std::move(rows));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// The tokenizer the model's ids came from: --tokenizer, else the data.tokenizer of the job recorded
// beside the checkpoint (none for byte-level data, or without a journal).
Result<std::optional<tokens::Tokenizer>> tokenizer_of(const Parsed& p, const std::string& checkpoint) {
  std::string path = p.get_or("--tokenizer", "");
  if (path.empty()) {
    auto run = job_to_resume({.path = checkpoint});
    if (!run || run->job.data.tokenizer.empty()) return std::optional<tokens::Tokenizer>();
    path = job::resolve_path(run->job, run->job.data.tokenizer);
  }
  auto t = tokens::Tokenizer::load(path);
  if (!t) return t.error();
  return std::optional<tokens::Tokenizer>(std::move(*t));
}

// The text the drawn ids add after the prompt's: decoded with the prompt, so that pieces joining
// across the seam decode as they would in one text.
Result<std::string> continuation(const tokens::Tokenizer& t, const std::vector<uint32_t>& prompt,
                                 const std::vector<int32_t>& drawn) {
  std::vector<uint32_t> all = prompt;
  all.insert(all.end(), drawn.begin(), drawn.end());
  auto whole = t.decode(all), head = t.decode(prompt);
  if (!whole || !head) return !whole ? whole.error() : head.error();
  if (whole->compare(0, head->size(), *head) == 0) return whole->substr(head->size());
  return t.decode(std::vector<uint32_t>(drawn.begin(), drawn.end()));
}

// Ids as the model takes them.
std::vector<int32_t> model_ids(const std::vector<uint32_t>& ids) { return {ids.begin(), ids.end()}; }

int print_token_sample(model::Params& params, const Parsed& p, const model::SampleOptions& o,
                       const tokens::Tokenizer& t, const std::string& manifest_tokens) {
  if (manifest_tokens == "bytes")
    return fail_with(fail("tokenizer ", t.source(), ": this model was trained on bytes (its manifest says tokens bytes)"));
  if (t.vocab() > params.dims.vocab)
    return fail_with(fail("tokenizer ", t.source(), " has ", t.vocab(), " pieces, more than the model's vocabulary of ",
                          params.dims.vocab, ": it is not the tokenizer the model was trained with"));
  if (auto file = p.get("--score")) {
    auto text = read_file(*file);
    auto ids = text ? t.encode(*text) : Result<std::vector<uint32_t>>(text.error());
    auto loss = ids ? model::ids_loss(params, model_ids(*ids)) : Result<double>(ids.error());
    if (!loss) return fail_with(loss.error().with_context("--score " + *file));
    std::fprintf(stderr, "loss on %s: %.4f nats/token\n", file->c_str(), *loss);
  }
  auto prompt = t.encode(o.prompt);
  if (prompt && prompt->empty()) return fail_with(fail("the prompt encodes to no tokens (give some text)"));
  auto drawn = prompt ? model::sample_ids(params, model_ids(*prompt), o.bytes, o, t.vocab())
                      : Result<std::vector<int32_t>>(prompt.error());
  auto text = drawn ? continuation(t, *prompt, *drawn) : Result<std::string>(drawn.error());
  if (!text) return fail_with(text.error());
  std::printf("%s%s\n", o.prompt.c_str(), text->c_str());
  return 0;
}

int print_sample(model::Params& params, const Parsed& p, const model::SampleOptions& o) {
  if (params.dims.vocab != 256)
    return fail_with(fail("this model reads token ids (vocab ", params.dims.vocab, ") and no tokenizer says how text ",
                          "maps to them: give --tokenizer SPM.model (the job's data.tokenizer, when its run recorded "
                          "one, is read by itself)"));
  if (auto file = p.get("--score")) {
    auto text = read_file(*file);
    auto loss = text ? model::text_loss(params, *text) : Result<double>(text.error());
    if (!loss) return fail_with(loss.error().with_context("--score " + *file));
    std::fprintf(stderr, "loss on %s: %.4f nats/byte\n", file->c_str(), *loss);
  }
  auto text = model::sample_bytes(params, o);
  if (!text) return fail_with(text.error());
  std::printf("%s%s\n", o.prompt.c_str(), text->c_str());
  return 0;
}

}  // namespace

int cmd_sample(const Command& cmd, const Parsed& p) {
  std::string named = p.get_or("--checkpoint", "");
  if (named.empty()) return usage_error(cmd, "--checkpoint DIR is required");
  model::SampleOptions o;
  o.prompt = p.get_or("--prompt", "\n");
  auto bytes = p.get_int("--bytes", 200, 0, 1 << 20);
  auto seed = p.get_int("--seed", 1, 0, INT64_MAX);
  for (auto* r : {&bytes, &seed})
    if (!*r) return usage_error(cmd, r->error().message());
  o.bytes = int(*bytes);
  o.seed = uint64_t(*seed);
  std::string temp = p.get_or("--temperature", "0.8");
  char* end = nullptr;
  o.temperature = std::strtod(temp.c_str(), &end);
  if (end == temp.c_str() || *end || o.temperature < 0 || o.temperature > 100)
    return usage_error(cmd, "--temperature: expected a number in [0, 100], got '" + temp + "'");
  auto dir = ckpt::resolve_checkpoint(named);
  if (!dir) return fail_with(dir.error());
  auto manifest = ckpt::read_manifest(*dir);
  auto params = manifest ? ckpt::load_all(*dir) : Result<model::Params>(manifest.error());
  if (!params) return fail_with(params.error());
  if (auto ids = p.get("--logits")) return print_logits(*params, *dir, manifest->step, *ids);
  auto tok = tokenizer_of(p, named);
  if (!tok) return fail_with(tok.error());
  if (*tok) return print_token_sample(*params, p, o, **tok, manifest->tokens);
  return print_sample(*params, p, o);
}

}  // namespace sal::cli

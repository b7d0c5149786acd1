// cmd_sample.cpp — `salamander sample --checkpoint DIR`: loads a dense checkpoint (the one a run
// leaves in <run>/checkpoint, a complete snapshot, or a run directory's newest) into this process
// and prints the model's continuation of a prompt — or, with --logits, the logits of given token ids
// as JSON (what an exported copy of the model must reproduce; tests/ckpt/torch_export.py checks it).
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "ckpt/format.h"
#include "core/paths.h"
#include "core/strings.h"
#include "model/local_exchange.h"
#include "model/model.h"
#include "model/sample.h"

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

int print_sample(model::Params& params, const Parsed& p, const model::SampleOptions& o) {
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
  return print_sample(*params, p, o);
}

}  // namespace sal::cli

// cmd_sample.cpp — `salamander sample --checkpoint DIR`: loads a dense checkpoint (the one a run
// leaves in <run>/checkpoint) into this process and prints the model's continuation of a prompt.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/paths.h"
#include "ckpt/format.h"
#include "model/sample.h"

namespace sal::cli {

int cmd_sample(const Args& args) {
  Command cmd{"sample", "sample --checkpoint DIR [--prompt TEXT] [--bytes N] [--temperature T] [--seed S]",
              "Prints what a trained byte-level model writes after a prompt.",
              {{"--checkpoint", "DIR", "a checkpoint directory (a run writes <run>/checkpoint)"},
               {"--prompt", "TEXT", "the text to continue (default: a newline)"},
               {"--bytes", "N", "bytes to generate (default 200)"},
               {"--temperature", "T", "sampling temperature; 0 takes the most likely byte (default 0.8)"},
               {"--seed", "S", "random seed (default 1)"},
               {"--score", "FILE", "also print the model's loss (nats per byte) on the text in FILE"}}};
  int code = 0;
  auto p = parse_command(cmd, args, code);
  if (!p) return code;
  std::string dir = p->get_or("--checkpoint", "");
  if (dir.empty()) return usage_error(cmd, "--checkpoint DIR is required");
  model::SampleOptions o;
  o.prompt = p->get_or("--prompt", "\n");
  auto bytes = p->get_int("--bytes", 200, 0, 1 << 20);
  auto seed = p->get_int("--seed", 1, 0, INT64_MAX);
  for (auto* r : {&bytes, &seed})
    if (!*r) return usage_error(cmd, r->error().message());
  o.bytes = int(*bytes);
  o.seed = uint64_t(*seed);
  std::string temp = p->get_or("--temperature", "0.8");
  char* end = nullptr;
  o.temperature = std::strtod(temp.c_str(), &end);
  if (end == temp.c_str() || *end || o.temperature < 0 || o.temperature > 100)
    return usage_error(cmd, "--temperature: expected a number in [0, 100], got '" + temp + "'");
  auto params = ckpt::load_all(dir);
  if (!params) {
    std::fprintf(stderr, "%s\n", params.error().message().c_str());
    return 1;
  }
  if (auto file = p->get("--score")) {
    auto text = read_file(*file);
    auto loss = text ? model::text_loss(*params, *text) : Result<double>(text.error());
    if (!loss) {
      std::fprintf(stderr, "--score %s: %s\n", file->c_str(), loss.error().message().c_str());
      return 1;
    }
    std::fprintf(stderr, "loss on %s: %.4f nats/byte\n", file->c_str(), *loss);
  }
  auto text = model::sample_bytes(*params, o);
  if (!text) {
    std::fprintf(stderr, "%s\n", text.error().message().c_str());
    return 1;
  }
  std::printf("%s%s\n", o.prompt.c_str(), text->c_str());
  return 0;
}

}  // namespace sal::cli

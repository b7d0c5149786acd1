// cmd_export.cpp — `salamander export --checkpoint DIR [--format safetensors] [--out FILE]
// [--optimizer]`: writes a checkpoint (or a complete snapshot, or a run directory's newest) as one
// file of named tensors with the model's configuration as metadata (engine/ckpt/export.h), for
// PyTorch and the tools around it. docs/checkpoints.md describes both formats.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "ckpt/export.h"
#include "core/strings.h"

namespace sal::cli {

int cmd_export(const Command& cmd, const Parsed& p) {
  static const std::vector<std::string> kFormats{"safetensors"};
  std::string dir = p.get_or("--checkpoint", "");
  if (dir.empty()) return usage_error(cmd, "--checkpoint DIR is required");
  const std::string format = p.get_or("--format", kFormats.front());
  if (std::find(kFormats.begin(), kFormats.end(), format) == kFormats.end())
    return usage_error(cmd, "--format: '" + format + "' is not an export format" + did_you_mean(format, kFormats) +
                                " (" + join(kFormats, ", ") + ")");
  std::string out = p.get_or("--out", "model.safetensors");
  auto done = ckpt::export_safetensors(dir, out, p.has("--optimizer"));
  if (!done) {
    std::fprintf(stderr, "salamander export: %s\n", done.error().message().c_str());
    return 1;
  }
  std::printf("wrote %s: %zu tensors, %zu bytes, step %llu, from %s\n", out.c_str(), done->tensors, done->bytes,
              (unsigned long long)done->step, done->checkpoint.c_str());
  if (!done->config.empty()) std::printf("wrote %s (the Hugging Face config)\n", done->config.c_str());
  return 0;
}

}  // namespace sal::cli

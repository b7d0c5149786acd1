// cmd_import.cpp — `salamander import HF_DIR --out DIR`: a Hugging Face-style moe-llama checkpoint
// becomes a checkpoint this engine runs from (engine/ckpt/import.h), with a job file for it.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "ckpt/import.h"

namespace sal::cli {

int cmd_import(const Command& cmd, const Parsed& p) {
  if (p.positional.size() != 1) return usage_error(cmd, "expected one HF_DIR (config.json and model.safetensors)");
  const std::string out = p.get_or("--out", "");
  if (out.empty()) return usage_error(cmd, "--out DIR is required");
  auto done = ckpt::import_hf(p.positional[0], out);
  if (!done) {
    std::fprintf(stderr, "salamander import: %s\n", done.error().message().c_str());
    return 1;
  }
  const auto& d = done->model.dims;
  std::printf("imported %s (%s): %zu tensors, %zu parameters%s, step %llu — moe-llama, %d layers, d_model %d, "
              "%d experts (top %d)\n",
              p.positional[0].c_str(), done->model.model_type.c_str(), done->tensors, done->parameters,
              done->moments ? " with AdamW's moments" : "", (unsigned long long)done->step, d.layers, d.d, d.experts,
              d.top_k);
  std::printf("wrote the checkpoint %s and its job file %s (set its data, then: salamander run %s --resume %s)\n",
              done->checkpoint.c_str(), done->job_file.c_str(), done->job_file.c_str(), done->checkpoint.c_str());
  return 0;
}

}  // namespace sal::cli

// export.h — a checkpoint as one portable file (`salamander export`): every tensor of the model
// under a name, in the shape the engine computes with, and the model's configuration as metadata,
// in the safetensors format. docs/checkpoints.md documents the names, the shapes and the keys.
//
// Names: embed.tokens [V,d] (also the LM head: tied), embed.positions [T,d], final_norm.weight|bias
// [d]; per layer L: layers.L.ln1.weight|bias, layers.L.ln2.weight|bias [d], layers.L.attn.w_qkv
// [d,3d], .b_qkv [3d], .w_o [d,d], .b_o [d], layers.L.gate.w [d,E], and per expert X
// layers.L.experts.X.w1 [d,4d], .b1 [4d], .w2 [4d,d], .b2 [d]. A matrix w_* is [in, out]: the
// engine computes x @ W + b (PyTorch's nn.Linear.weight is its transpose). With the optimizer
// state, AdamW's moments follow as optim.exp_avg.<name> and optim.exp_avg_sq.<name>.
//
// A moe-llama checkpoint is exported in the Hugging Face layout instead (ckpt/hf_layout.h: Mixtral's
// names where the model is a Mixtral, else the mlp naming), with a config.json written beside the
// file (ckpt/hf_config.h), so transformers and `salamander import` read it; the moments follow
// under the same prefixes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/format.h"
#include "ckpt/safetensors.h"

namespace sal::ckpt {

// The model's tensors under their exported names, in model order: the weights, then, with
// `optimizer`, AdamW's first and second moments. moe-gpt's are views into p's units; moe-llama's
// are rearranged into HF's layout and held in `owned`.
struct ExportTensors {
  std::vector<NamedTensor> tensors;
  std::vector<std::vector<float>> owned;
};
ExportTensors model_tensors(const Params& p, bool optimizer);

// The `__metadata__` of an export: the model's configuration (the manifest's shape, ffn, heads,
// top_k, vocab, the token format), the step, and the conventions a reader needs to rebuild it.
std::map<std::string, std::string> model_metadata(const Manifest& m, bool optimizer);

struct ExportSummary {
  std::string checkpoint;  // the directory exported (resolved from what was named)
  uint64_t step = 0;
  size_t tensors = 0;
  size_t bytes = 0;  // of the file
  std::string config;  // moe-llama: the config.json written beside it
};

// Resolves `path` (a checkpoint, a complete snapshot, or a run directory: resolve_checkpoint),
// loads every unit and writes the safetensors file `out` (and, for moe-llama, config.json in its
// directory). Fails naming the directory or unit file
// when the checkpoint is not one or is incomplete.
Result<ExportSummary> export_safetensors(const std::string& path, const std::string& out, bool optimizer);

}  // namespace sal::ckpt

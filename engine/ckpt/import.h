// import.h — `salamander import`: a Hugging Face-style moe-llama checkpoint (config.json and
// model.safetensors, or model.safetensors.index.json and its shards) becomes a checkpoint this
// engine runs from (`run --resume`): the manifest, one file per unit, and a job file with the
// model's section filled in. Every tensor the config implies must be there with its shape; a tensor
// that is not one of moe-llama's is refused by name (nothing is silently dropped). AdamW's moments
// come along where the file has them (an export with --optimizer: optim.exp_avg.NAME,
// optim.exp_avg_sq.NAME), else they start at zero.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/hf_config.h"
#include "core/result.h"

namespace sal::ckpt {

struct ImportSummary {
  std::string checkpoint;  // the directory written
  std::string job_file;    // its job file
  HfModel model;
  uint64_t step = 0;       // the export's step, or 0
  size_t tensors = 0;      // read
  size_t parameters = 0;
  bool moments = false;    // AdamW's moments were in the file
};

Result<ImportSummary> import_hf(const std::string& dir, const std::string& out);

// The job file written beside an import: the model section of `d`, a data section to fill in.
std::string import_job_text(const Dims& d, const std::string& tokens);

}  // namespace sal::ckpt

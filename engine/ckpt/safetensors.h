// safetensors.h — writing the safetensors format (the tensor file PyTorch, JAX and most model hubs
// read): an 8-byte little-endian length N, then N bytes of a JSON header — per tensor its dtype,
// shape and data_offsets [begin, end) into the data that follows, plus "__metadata__", a map of
// strings to strings — padded with spaces so that the data starts at a multiple of 8 bytes, then
// the tensors' raw little-endian bytes, back to back in the order given, covering the data exactly.
// Only F32 tensors: the engine's weights and moments are fp32.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::ckpt {

struct NamedTensor {
  std::string name;            // "layers.3.experts.5.w1"
  std::vector<int64_t> shape;  // row-major, outermost first
  const float* data = nullptr;  // shape's product floats, alive while encoding
};

// The whole file. Fails (naming the tensor) on an empty or duplicate name, the reserved
// "__metadata__", or a negative dimension.
Result<std::string> encode_safetensors(const std::vector<NamedTensor>& tensors,
                                       const std::map<std::string, std::string>& metadata);

}  // namespace sal::ckpt

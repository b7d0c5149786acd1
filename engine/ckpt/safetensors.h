// safetensors.h — writing the safetensors format (the tensor file PyTorch, JAX and most model hubs
// read): an 8-byte little-endian length N, then N bytes of a JSON header — per tensor its dtype,
// shape and data_offsets [begin, end) into the data that follows, plus "__metadata__", a map of
// strings to strings — padded with spaces so that the data starts at a multiple of 8 bytes, then
// the tensors' raw little-endian bytes, back to back in the order given, covering the data exactly.
// Writing: F32 tensors only (the engine's weights and moments are fp32). Reading (import): F32,
// F16 and BF16 (what model hubs hold), every header field checked against the file.
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

// One tensor of a file read: its dtype, shape, and bytes [begin, end) of the data section.
struct StoredTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;
  size_t elements() const;
};

// A safetensors file read whole and checked: the header is JSON of the right shape, every tensor's
// dtype is known, its byte range lies in the file and matches its shape, and the ranges do not
// overlap. Errors name the file and the tensor.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> read(const std::string& path);
  static Result<SafetensorsFile> parse(std::string bytes, const std::string& label);

  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& label() const { return label_; }
  // The tensor's values in fp32 (F16 and BF16 widened exactly); fails naming a tensor not there or
  // of another dtype.
  Result<std::vector<float>> floats(const std::string& name) const;

 private:
  std::string label_, bytes_;
  size_t data_ = 0;  // where the data section starts
  std::map<std::string, StoredTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sal::ckpt

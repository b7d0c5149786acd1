// safetensors.cpp — see safetensors.h.
#include "ckpt/safetensors.h"

#include <bit>
#include <nlohmann/json.hpp>
#include <set>

namespace sal::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian: write it byte-swapped");

constexpr size_t kAlign = 8;  // the data starts at a multiple of this (header length included)

Result<size_t> element_count(const NamedTensor& t) {
  size_t n = 1;
  for (int64_t dim : t.shape) {
    if (dim < 0) return fail(t.name, ": negative dimension ", dim);
    n *= size_t(dim);
  }
  return n;
}

// The header's JSON: the metadata first, then each tensor in the order given, its bytes at `offset`.
Result<nlohmann::ordered_json> header(const std::vector<NamedTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> seen;
  size_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") return fail("a tensor may not be named '", t.name, "'");
    if (!seen.insert(t.name).second) return fail(t.name, ": two tensors of that name");
    auto n = element_count(t);
    if (!n) return n.error();
    size_t bytes = *n * sizeof(float);
    h[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  return h;
}

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

}  // namespace

Result<std::string> encode_safetensors(const std::vector<NamedTensor>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  auto h = header(tensors, metadata);
  if (!h) return h.error();
  std::string json = h->dump();
  json.resize((json.size() + 8 + kAlign - 1) / kAlign * kAlign - 8, ' ');
  std::string out;
  put_u64_le(out, json.size());
  out += json;
  for (const auto& t : tensors) {
    size_t n = *element_count(t);
    out.append(reinterpret_cast<const char*>(t.data), n * sizeof(float));
  }
  return out;
}

}  // namespace sal::ckpt

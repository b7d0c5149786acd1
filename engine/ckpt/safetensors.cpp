// safetensors.cpp — see safetensors.h.
#include "ckpt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/paths.h"

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

namespace {

size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

uint64_t get_u64_le(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint8_t(b[size_t(i)]);
  return v;
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// IEEE half to float, exactly (subnormals, infinities and NaN included).
float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  const float sub = float(mant) * 0x1p-24f;  // subnormal (or zero)
  return sign ? -sub : sub;
}

Result<StoredTensor> stored_tensor(const std::string& name, const nlohmann::json& j, size_t data_bytes) {
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
    return fail(name, ": expected {dtype, shape, data_offsets}");
  StoredTensor t;
  if (!j["dtype"].is_string()) return fail(name, ": dtype is not a string");
  t.dtype = j["dtype"].get<std::string>();
  if (!dtype_bytes(t.dtype)) return fail(name, ": dtype ", t.dtype, " cannot be read (F32, F16 and BF16 can)");
  if (!j["shape"].is_array()) return fail(name, ": shape is not a list");
  for (const auto& dim : j["shape"]) {
    if (!dim.is_number_unsigned()) return fail(name, ": a dimension is not a non-negative integer");
    t.shape.push_back(dim.get<int64_t>());
  }
  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return fail(name, ": data_offsets is not [begin, end]");
  t.begin = off[0].get<size_t>(), t.end = off[1].get<size_t>();
  if (t.begin > t.end || t.end > data_bytes)
    return fail(name, ": data_offsets [", t.begin, ", ", t.end, ") outside the ", data_bytes, " bytes of data");
  if (t.end - t.begin != t.elements() * dtype_bytes(t.dtype))
    return fail(name, ": ", t.end - t.begin, " bytes for ", t.elements(), " elements of ", t.dtype);
  return t;
}

}  // namespace

size_t StoredTensor::elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

Result<SafetensorsFile> SafetensorsFile::read(const std::string& path) {
  auto bytes = read_file(path, size_t(1) << 40);
  if (!bytes) return bytes.error();
  return parse(std::move(*bytes), path);
}

Result<SafetensorsFile> SafetensorsFile::parse(std::string bytes, const std::string& label) {
  if (bytes.size() < 8) return fail(label, ": not a safetensors file (", bytes.size(), " bytes)");
  const uint64_t n = get_u64_le(bytes);
  if (n > bytes.size() - 8) return fail(label, ": a header of ", n, " bytes in a file of ", bytes.size());
  auto h = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + long(n), nullptr, false);
  if (h.is_discarded() || !h.is_object()) return fail(label, ": the header is not a JSON object");
  SafetensorsFile f;
  f.label_ = label;
  f.data_ = 8 + size_t(n);
  const size_t data_bytes = bytes.size() - f.data_;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto& [name, j] : h.items()) {
    if (name == "__metadata__") {
      if (!j.is_object()) return fail(label, ": __metadata__ is not an object");
      for (auto& [k, v] : j.items())
        if (v.is_string()) f.metadata_[k] = v.get<std::string>();
      continue;
    }
    auto t = stored_tensor(name, j, data_bytes);
    if (!t) return t.error().with_context(label);
    ranges.emplace_back(t->begin, t->end);
    f.tensors_.emplace(name, std::move(*t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return fail(label, ": two tensors' data overlap");
  f.bytes_ = std::move(bytes);
  return f;
}

Result<std::vector<float>> SafetensorsFile::floats(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return fail(label_, ": no tensor ", name);
  const StoredTensor& t = it->second;
  const char* src = bytes_.data() + data_ + t.begin;
  std::vector<float> out(t.elements());
  if (t.dtype == "F32") {
    std::memcpy(out.data(), src, out.size() * sizeof(float));
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = t.dtype == "BF16" ? bf16_to_float(h) : f16_to_float(h);
  }
  return out;
}

}  // namespace sal::ckpt

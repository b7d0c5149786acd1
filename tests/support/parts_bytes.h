// parts_bytes.h — a message's frames (wire::Parts) through a byte string: how a test's worker
// process (comm/workers.h) hands what it would have sent — a SlicePut, an upstream log — back to
// the test in its report. Each frame list is its count, then each frame's length and bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "wire/codec.h"

namespace sal::test {

inline void put_parts(std::string& out, const wire::Parts& parts) {
  const uint32_t n = uint32_t(parts.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  for (const auto& f : parts) {
    const uint64_t len = f.size();
    out.append(reinterpret_cast<const char*>(&len), sizeof len);
    out.append(static_cast<const char*>(f.data()), f.size());
  }
}

// The frame list at `at` (moved past it), or none where the bytes end first.
inline std::optional<wire::Parts> get_parts(const std::string& in, size_t& at) {
  uint32_t n = 0;
  if (at + sizeof n > in.size()) return std::nullopt;
  std::memcpy(&n, in.data() + at, sizeof n);
  at += sizeof n;
  wire::Parts parts;
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t len = 0;
    if (at + sizeof len > in.size()) return std::nullopt;
    std::memcpy(&len, in.data() + at, sizeof len);
    at += sizeof len;
    if (at + len > in.size()) return std::nullopt;
    parts.emplace_back(in.data() + at, len);
    at += len;
  }
  return parts;
}

}  // namespace sal::test

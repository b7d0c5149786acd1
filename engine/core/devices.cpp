// devices.cpp — see devices.h.
#include "core/devices.h"

#include <set>

#include "core/strings.h"

namespace sal {

Result<std::vector<std::string>> parse_devices(const std::string& spec) {
  auto colon = spec.find(':');
  const std::string expected = " (expected cpu:K or cuda:I[,J...])";
  if (colon == std::string::npos) return fail("device spec '", spec, "'", expected);
  std::string kind = spec.substr(0, colon);
  std::string rest = spec.substr(colon + 1);
  std::vector<std::string> out;
  if (kind == "cpu") {
    auto n = parse_uint(rest);
    if (!n || *n == 0 || *n > uint64_t(kMaxDevicesPerNode))
      return fail("device spec '", spec, "': cpu:K needs 1 <= K <= ", kMaxDevicesPerNode);
    for (uint64_t i = 0; i < *n; ++i) out.push_back("cpu:" + std::to_string(i));
    return out;
  }
  if (kind == "cuda") {
    std::set<uint64_t> seen;
    for (auto& part : split(rest, ',')) {
      auto i = parse_uint(part);
      if (!i || *i >= uint64_t(kMaxDevicesPerNode))
        return fail("device spec '", spec, "': '", part, "' is not a GPU ordinal");
      if (!seen.insert(*i).second) return fail("device spec '", spec, "': cuda:", *i, " twice");
      out.push_back("cuda:" + std::to_string(*i));
    }
    return out;
  }
  return fail("device spec '", spec, "': unknown device kind '", kind, "'", expected);
}

bool valid_device_name(const std::string& name) {
  for (const char* kind : {"cpu:", "cuda:"}) {
    std::string k(kind);
    if (name.rfind(k, 0) != 0) continue;
    auto n = parse_uint(name.substr(k.size()));
    return n.ok() && *n < uint64_t(kMaxDevicesPerNode);
  }
  return false;
}

}  // namespace sal

// fields.h — internal to engine/sim: reading a JSON object field by field with the path of each
// field in every error ("strategies[2].checkpoint.every: must be an integer >= 1, got 0"), and
// refusing keys nobody read ("workload.topk: unknown field (known: layers, experts, top_k, ...)").
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::sim {

class Fields {
 public:
  // `j` must be an object (or null: every field takes its default).
  Fields(const nlohmann::json& j, std::string path);

  bool has(const std::string& key) const;
  const nlohmann::json* raw(const std::string& key);  // marks the key read; nullptr when absent

  Status number(const std::string& key, double& out, double lo, double hi);
  Status integer(const std::string& key, int64_t& out, int64_t lo, int64_t hi);
  Status count(const std::string& key, uint32_t& out, uint32_t lo, uint32_t hi);
  Status boolean(const std::string& key, bool& out);
  Status text(const std::string& key, std::string& out, const std::vector<std::string>& choices = {});

  std::string path(const std::string& key) const;
  // Errors for keys never read.
  Status finish() const;

 private:
  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> read_;
};

}  // namespace sal::sim

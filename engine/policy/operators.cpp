// operators.cpp — see operators.h.
#include "policy/operators.h"

namespace sal::policy {

OperatorInfo operator_info(const UnitId& id, double full_bytes, double compute_bytes, double popularity) {
  return {id.name(), unit_kind_name(id.kind), int32_t(id.layer), int32_t(id.expert), full_bytes, compute_bytes, popularity};
}

std::vector<OperatorInfo> model_operators(const ModelShape& shape, const std::vector<std::vector<double>>& popularity) {
  std::vector<OperatorInfo> ops;
  for (const UnitId& id : model_units(shape)) {
    double params = double(unit_size(shape, id.kind));
    double pop = 0;
    if (id.kind == UnitKind::expert && size_t(id.layer) < popularity.size() &&
        size_t(id.expert) < popularity[size_t(id.layer)].size())
      pop = popularity[size_t(id.layer)][size_t(id.expert)];
    ops.push_back(operator_info(id, params * kFullBytesPerParam, params * kComputeBytesPerParam, pop));
  }
  return ops;
}

}  // namespace sal::policy

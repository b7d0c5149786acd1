// operators.h — the checkpoint-window policy's view of a model: one OperatorInfo per unit of the
// shared model description (core/model_shape.h), in its canonical order (a schedule's operator
// indices index this list), with the bytes of a full snapshot (weights and AdamW's moments) and of
// the compute weights, and for each expert its popularity: its share of the tokens routed in its
// layer. The simulator names its (scaled) operators the same way with operator_info().
#pragma once

#include <vector>

#include "core/model_shape.h"
#include "policy/decision.h"

namespace sal::policy {

OperatorInfo operator_info(const UnitId& id, double full_bytes, double compute_bytes, double popularity);

// `popularity[layer][expert]` may be empty (not measured yet: 0 for every expert).
std::vector<OperatorInfo> model_operators(const ModelShape& shape,
                                          const std::vector<std::vector<double>>& popularity = {});

}  // namespace sal::policy

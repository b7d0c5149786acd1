// unit_refs.h — a model unit (core/model_shape.h: UnitId) as the slice messages name it
// (SliceUnitRef: kind, layer, expert), and back, checked against the model's shape.
#pragma once

#include "core/model_shape.h"
#include "core/result.h"
#include "wire/slice_messages.h"

namespace sal::wire {

SliceUnitRef unit_ref(const UnitId& id);
// The unit a reference names, if it is one of the model's.
Result<UnitId> unit_of(const SliceUnitRef& r, const ModelShape& shape);

}  // namespace sal::wire

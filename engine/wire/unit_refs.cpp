// unit_refs.cpp — see unit_refs.h.
#include "wire/unit_refs.h"

namespace sal::wire {

SliceUnitRef unit_ref(const UnitId& id) { return {uint8_t(id.kind), int32_t(id.layer), int32_t(id.expert)}; }

Result<UnitId> unit_of(const SliceUnitRef& r, const ModelShape& shape) {
  UnitId id{UnitKind(r.kind), r.layer, r.expert};
  if (r.kind > uint8_t(UnitKind::expert) || unit_index(shape, id) < 0)
    return fail("no unit kind ", int(r.kind), " layer ", r.layer, " expert ", r.expert, " in the model");
  return id;
}

}  // namespace sal::wire

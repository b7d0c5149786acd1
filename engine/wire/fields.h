// fields.h — how the codec (codec.h) finds the field list of a type it encodes: the type's own
// static `fields(self, visit)` (every message in messages.h), or, for a value type defined outside
// the wire, a specialisation of Fields that names its fields (plan_fields.h).
#pragma once

namespace sal::wire {

template <class T>
struct Fields {
  template <class S, class V>
  static void visit(S& s, V& v) {
    T::fields(s, v);
  }
};

}  // namespace sal::wire

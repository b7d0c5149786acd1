// fields.h — how a message's fields are written once, and how the codec (codec.h) finds them.
//
// Inside a message struct, SAL_WIRE_FIELDS((type, name, default[, bound]), ...) declares each field
// as a member with its default, and the static fields(self, visit) that names them, in wire order,
// for the codec: fields(s, v) calls v("name", s.name[, bound]) for each, in that order. The bound
// is the most a string may hold (bytes) or a list (elements); a field without one is a number, an
// enum, a bool or a struct with fields of its own. Comments may stand between the fields. A type
// with a comma in it (a map) needs an alias first.
//
// The codec asks Fields<T>::visit, which is T::fields for every message; a value type defined
// outside the wire (the plan, plan/plan.h) gets a specialisation of Fields that names its fields
// (plan_fields.h).
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

// A for-each over the macro's arguments: each expansion level rescans its argument, so four levels
// of four give 256 rescans, far more fields than a message has.
#define SAL_WIRE_PARENS ()
#define SAL_WIRE_EXPAND(...) SAL_WIRE_EXPAND3(SAL_WIRE_EXPAND3(SAL_WIRE_EXPAND3(SAL_WIRE_EXPAND3(__VA_ARGS__))))
#define SAL_WIRE_EXPAND3(...) SAL_WIRE_EXPAND2(SAL_WIRE_EXPAND2(SAL_WIRE_EXPAND2(SAL_WIRE_EXPAND2(__VA_ARGS__))))
#define SAL_WIRE_EXPAND2(...) SAL_WIRE_EXPAND1(SAL_WIRE_EXPAND1(SAL_WIRE_EXPAND1(SAL_WIRE_EXPAND1(__VA_ARGS__))))
#define SAL_WIRE_EXPAND1(...) __VA_ARGS__
#define SAL_WIRE_FOR_EACH(m, ...) __VA_OPT__(SAL_WIRE_EXPAND(SAL_WIRE_FOR_EACH_NEXT(m, __VA_ARGS__)))
#define SAL_WIRE_FOR_EACH_NEXT(m, field, ...) m field __VA_OPT__(SAL_WIRE_FOR_EACH_AGAIN SAL_WIRE_PARENS(m, __VA_ARGS__))
#define SAL_WIRE_FOR_EACH_AGAIN() SAL_WIRE_FOR_EACH_NEXT

#define SAL_WIRE_MEMBER(type, name, init, ...) type name = init;
#define SAL_WIRE_VISIT(type, name, init, ...) v(#name, s.name __VA_OPT__(, ) __VA_ARGS__);

#define SAL_WIRE_FIELDS(...)                                   \
  SAL_WIRE_FOR_EACH(SAL_WIRE_MEMBER, __VA_ARGS__)              \
  template <class S, class V>                                  \
  static void fields([[maybe_unused]] S& s, [[maybe_unused]] V& v) { \
    SAL_WIRE_FOR_EACH(SAL_WIRE_VISIT, __VA_ARGS__)             \
  }

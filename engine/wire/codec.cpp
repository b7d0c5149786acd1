// codec.cpp — see codec.h. The field visitors below turn each message's `fields` list into an
// encoder, a counter and a checked decoder; explicit instantiations at the end cover every message.
#include "wire/codec.h"

#include <msgpack.hpp>

#include <cstring>
#include <limits>
#include <type_traits>

namespace sal::wire {

struct Body {
  msgpack::object_handle handle;
};

namespace {

constexpr size_t kDefaultStringMax = kTextMax;
constexpr size_t kDefaultListMax = kListMax;

// msgpack limits applied while parsing, before any field is looked at: they stop array/map/depth
// bombs at the header (the frame size cap stops str/bin bombs earlier still).
const msgpack::unpack_limit kLimits(
    /*array=*/1u << 20, /*map=*/1024, /*str=*/size_t(kMaxFrameBytes), /*bin=*/size_t(kMaxFrameBytes),
    /*ext=*/1024, /*depth=*/16);

const char* kind_name(msgpack::type::object_type t) {
  switch (t) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER: return "uint";
    case msgpack::type::NEGATIVE_INTEGER: return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bin";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "ext";
  }
  return "?";
}

Error type_error(const char* want, const msgpack::object& o) {
  return fail("expected ", want, ", got ", kind_name(o.type));
}

// Joins a child's error under a field name: "pid" + "expected uint" -> "pid: expected uint",
// "workers" + "[2].pid: ..." -> "workers[2].pid: ...".
Error under(const std::string& name, const Error& child) {
  const std::string& m = child.message();
  bool path = !m.empty() && (m[0] == '[' || m[0] == '.');
  return Error(name + (path ? "" : ": ") + m);
}

// ---------- encoding ----------

using Packer = msgpack::packer<msgpack::sbuffer>;

struct FieldCounter {
  size_t n = 0;
  template <class T>
  void operator()(const char*, const T&, size_t = 0) { ++n; }
};

template <class T>
size_t field_count() {
  static const size_t n = [] {
    FieldCounter c;
    const T sample{};
    Fields<T>::visit(sample, c);
    return c.n;
  }();
  return n;
}

void pack_value(Packer& pk, bool v) { pk.pack(v); }
void pack_value(Packer& pk, const std::string& v) { pk.pack(v); }
void pack_value(Packer& pk, double v) { pk.pack_double(v); }

template <class T>
  requires std::is_integral_v<T>
void pack_value(Packer& pk, T v) { pk.pack(v); }

template <class E>
  requires std::is_enum_v<E>
void pack_value(Packer& pk, E v) { pk.pack(uint64_t(std::underlying_type_t<E>(v))); }

template <class T>
void pack_value(Packer& pk, const std::vector<T>& v);

template <class T>
  requires(std::is_class_v<T>)
void pack_value(Packer& pk, const T& v);

struct FieldWriter {
  Packer& pk;
  template <class T>
  void operator()(const char*, const T& v, size_t = 0) { pack_value(pk, v); }
};

template <class T>
void pack_value(Packer& pk, const std::vector<T>& v) {
  pk.pack_array(uint32_t(v.size()));
  for (const auto& x : v) pack_value(pk, x);
}

template <class T>
  requires(std::is_class_v<T>)
void pack_value(Packer& pk, const T& v) {
  pk.pack_array(uint32_t(field_count<T>()));
  FieldWriter w{pk};
  Fields<T>::visit(v, w);
}

// ---------- decoding ----------

Status read_value(const msgpack::object& o, bool& out, size_t) {
  if (o.type != msgpack::type::BOOLEAN) return type_error("bool", o);
  out = o.via.boolean;
  return {};
}

Status read_value(const msgpack::object& o, double& out, size_t) {
  if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64) {
    out = o.via.f64;
  } else if (o.type == msgpack::type::POSITIVE_INTEGER) {
    out = double(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    out = double(o.via.i64);
  } else {
    return type_error("float", o);
  }
  return {};
}

Status read_value(const msgpack::object& o, std::string& out, size_t max) {
  if (o.type != msgpack::type::STR) return type_error("str", o);
  size_t limit = max ? max : kDefaultStringMax;
  if (o.via.str.size > limit) return fail("string of ", o.via.str.size, " bytes exceeds ", limit);
  out.assign(o.via.str.ptr, o.via.str.size);
  return {};
}

template <class T>
  requires std::is_integral_v<T>
Status read_value(const msgpack::object& o, T& out, size_t) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > uint64_t(std::numeric_limits<T>::max()))
      return fail("value ", o.via.u64, " out of range");
    out = T(o.via.u64);
    return {};
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    if constexpr (std::is_signed_v<T>) {
      if (o.via.i64 < int64_t(std::numeric_limits<T>::min()))
        return fail("value ", o.via.i64, " out of range");
      out = T(o.via.i64);
      return {};
    } else {
      return fail("expected uint, got negative ", o.via.i64);
    }
  }
  return type_error(std::is_signed_v<T> ? "int" : "uint", o);
}

template <class E>
  requires std::is_enum_v<E>
Status read_value(const msgpack::object& o, E& out, size_t) {
  uint64_t raw = 0;
  SAL_TRY(read_value(o, raw, 0));
  if (raw >= uint64_t(E::count_))
    return fail("enum value ", raw, " out of range (0..", uint64_t(E::count_) - 1, ")");
  out = E(raw);
  return {};
}

template <class T>
constexpr bool is_list = false;
template <class T>
constexpr bool is_list<std::vector<T>> = true;

template <class T>
Status read_value(const msgpack::object& o, std::vector<T>& out, size_t max);
Status read_value(const msgpack::object& o, std::vector<bool>& out, size_t max);

template <class T>
  requires(std::is_class_v<T>)
Status read_value(const msgpack::object& o, T& out, size_t);

struct FieldReader {
  const msgpack::object* items;
  size_t count;
  size_t next = 0;
  std::optional<Error> err;

  template <class T>
  void operator()(const char* name, T& v, size_t max = 0) {
    if (err) return;
    if (next >= count) {
      err = fail(name, ": missing");
      return;
    }
    Status s = read_value(items[next++], v, max);
    if (!s) err = under(name, s.error());
  }
};

template <class T>
Status read_value(const msgpack::object& o, std::vector<T>& out, size_t max) {
  if (o.type != msgpack::type::ARRAY) return type_error("array", o);
  size_t limit = max ? max : kDefaultListMax;
  if (o.via.array.size > limit) return fail("list of ", o.via.array.size, " exceeds ", limit);
  out.clear();
  out.resize(o.via.array.size);
  // A list of lists (a plan's placement, a schedule's slots) bounds its inner lists by its own bound.
  size_t inner = is_list<T> ? limit : 0;
  for (size_t i = 0; i < out.size(); ++i) {
    Status s = read_value(o.via.array.ptr[i], out[i], inner);
    if (!s) return under("[" + std::to_string(i) + "]", s.error());
  }
  return {};
}

// std::vector<bool> hands out proxies, not bool&: its own loop.
Status read_value(const msgpack::object& o, std::vector<bool>& out, size_t max) {
  if (o.type != msgpack::type::ARRAY) return type_error("array", o);
  size_t limit = max ? max : kDefaultListMax;
  if (o.via.array.size > limit) return fail("list of ", o.via.array.size, " exceeds ", limit);
  out.assign(o.via.array.size, false);
  for (size_t i = 0; i < out.size(); ++i) {
    bool b = false;
    Status s = read_value(o.via.array.ptr[i], b, 0);
    if (!s) return under("[" + std::to_string(i) + "]", s.error());
    out[i] = b;
  }
  return {};
}

template <class T>
  requires(std::is_class_v<T>)
Status read_value(const msgpack::object& o, T& out, size_t) {
  if (o.type != msgpack::type::ARRAY) return type_error("array", o);
  size_t want = field_count<T>();
  if (o.via.array.size != want)
    return fail("expected ", want, " fields, got ", size_t(o.via.array.size));
  FieldReader r{o.via.array.ptr, o.via.array.size};
  Fields<T>::visit(out, r);
  if (r.err) {
    Error e = *r.err;
    return Error("." + e.message());
  }
  return {};
}

}  // namespace

zmq::message_t header_frame(MsgType t, uint8_t version) {
  uint16_t ty = uint16_t(t);
  const uint8_t h[kHeaderBytes] = {'S', 'A', 'L', version, uint8_t(ty >> 8), uint8_t(ty & 0xff)};
  return zmq::message_t(h, kHeaderBytes);
}

Result<Envelope> open(const Parts& parts) {
  auto malformed = [](std::string m) { return Error(std::move(m), int(ErrorCode::malformed)); };
  if (parts.size() != 2)
    return malformed("expected 2 frames (header, body), got " + std::to_string(parts.size()));
  const auto& h = parts[0];
  if (h.size() != kHeaderBytes || std::memcmp(h.data(), "SAL", 3) != 0)
    return malformed("frame 0 is not a Salamander header");
  const auto* hb = static_cast<const uint8_t*>(h.data());
  if (hb[3] != kProtocolVersion)
    return Error("protocol version " + std::to_string(hb[3]) + " not supported (this build speaks " +
                     std::to_string(kProtocolVersion) + ")",
                 int(ErrorCode::bad_version));
  uint16_t type = uint16_t(hb[4] << 8 | hb[5]);
  if (!known_type(type)) return malformed("unknown message type " + std::to_string(type));
  const auto& b = parts[1];
  if (b.size() > size_t(kMaxFrameBytes)) return malformed("body too large");
  auto body = std::make_shared<Body>();
  size_t off = 0;
  try {
    body->handle = msgpack::unpack(static_cast<const char*>(b.data()), b.size(), off, nullptr,
                                   nullptr, kLimits);
  } catch (const msgpack::size_overflow& e) {
    return malformed(std::string(type_name(MsgType(type))) + ": body exceeds a size limit (" +
                     e.what() + ")");
  } catch (const msgpack::insufficient_bytes&) {
    return malformed(std::string(type_name(MsgType(type))) + ": body truncated");
  } catch (const std::exception& e) {
    return malformed(std::string(type_name(MsgType(type))) + ": body is not msgpack (" +
                     e.what() + ")");
  }
  if (off != b.size())
    return malformed(std::string(type_name(MsgType(type))) + ": " +
                     std::to_string(b.size() - off) + " trailing bytes after the body");
  return Envelope{MsgType(type), std::move(body)};
}

template <class M>
void encode_into(const M& msg, Parts& out) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pack_value(pk, msg);
  out.push_back(header_frame(M::kType));
  out.emplace_back(buf.data(), buf.size());
}

template <class M>
Parts encode(const M& msg) {
  Parts out;
  out.reserve(2);
  encode_into(msg, out);
  return out;
}

template <class M>
Result<M> decode(const Envelope& env) {
  std::string name(type_name(M::kType));
  if (env.type != M::kType)
    return Error(name + ": envelope holds " + std::string(type_name(env.type)),
                 int(ErrorCode::malformed));
  M msg;
  Status s = read_value(env.body->handle.get(), msg, 0);
  if (!s) return Error(under(name, s.error()).message(), int(ErrorCode::malformed));
  return msg;
}

#define SAL_WIRE_INSTANTIATE(M)                        \
  template Parts encode<M>(const M&);                  \
  template void encode_into<M>(const M&, Parts&);      \
  template Result<M> decode<M>(const Envelope&);

SAL_WIRE_INSTANTIATE(RegisterNode)
SAL_WIRE_INSTANTIATE(Welcome)
SAL_WIRE_INSTANTIATE(Heartbeat)
SAL_WIRE_INSTANTIATE(Ping)
SAL_WIRE_INSTANTIATE(WorkerEvent)
SAL_WIRE_INSTANTIATE(Goodbye)
SAL_WIRE_INSTANTIATE(Command)
SAL_WIRE_INSTANTIATE(StepBegin)
SAL_WIRE_INSTANTIATE(StepVote)
SAL_WIRE_INSTANTIATE(StepCommit)
SAL_WIRE_INSTANTIATE(StepAbort)
SAL_WIRE_INSTANTIATE(StepPatch)
SAL_WIRE_INSTANTIATE(ErrorReply)
SAL_WIRE_INSTANTIATE(JobSpec)
SAL_WIRE_INSTANTIATE(PlanUpdate)
SAL_WIRE_INSTANTIATE(PlanReady)
SAL_WIRE_INSTANTIATE(SaveCheckpoint)
SAL_WIRE_INSTANTIATE(SaveDone)
SAL_WIRE_INSTANTIATE(WorkerHello)
SAL_WIRE_INSTANTIATE(WorkerStatus)
SAL_WIRE_INSTANTIATE(ReplHello)
SAL_WIRE_INSTANTIATE(ReplWelcome)
SAL_WIRE_INSTANTIATE(ReplEval)
SAL_WIRE_INSTANTIATE(ReplResult)
SAL_WIRE_INSTANTIATE(ReplComplete)
SAL_WIRE_INSTANTIATE(ReplCompletions)
SAL_WIRE_INSTANTIATE(ReplBye)
SAL_WIRE_INSTANTIATE(FaultArm)
SAL_WIRE_INSTANTIATE(SlicePut)
SAL_WIRE_INSTANTIATE(SliceFetch)
SAL_WIRE_INSTANTIATE(SliceDone)
SAL_WIRE_INSTANTIATE(SliceReport)

const char* error_code_name(int code) {
  switch (ErrorCode(code)) {
    case ErrorCode::malformed: return "malformed";
    case ErrorCode::bad_version: return "bad version";
    case ErrorCode::unknown_node: return "unknown node";
    case ErrorCode::not_allowed: return "not allowed";
    case ErrorCode::bad_request: return "bad request";
  }
  return "other";
}

std::string_view type_name(MsgType t) {
  switch (t) {
    case MsgType::register_node: return "RegisterNode";
    case MsgType::welcome: return "Welcome";
    case MsgType::heartbeat: return "Heartbeat";
    case MsgType::ping: return "Ping";
    case MsgType::worker_event: return "WorkerEvent";
    case MsgType::goodbye: return "Goodbye";
    case MsgType::command: return "Command";
    case MsgType::step_begin: return "StepBegin";
    case MsgType::step_vote: return "StepVote";
    case MsgType::step_commit: return "StepCommit";
    case MsgType::step_abort: return "StepAbort";
    case MsgType::error: return "ErrorReply";
    case MsgType::job_spec: return "JobSpec";
    case MsgType::plan_update: return "PlanUpdate";
    case MsgType::plan_ready: return "PlanReady";
    case MsgType::save_checkpoint: return "SaveCheckpoint";
    case MsgType::save_done: return "SaveDone";
    case MsgType::fault_arm: return "FaultArm";
    case MsgType::worker_hello: return "WorkerHello";
    case MsgType::worker_status: return "WorkerStatus";
    case MsgType::repl_hello: return "ReplHello";
    case MsgType::repl_welcome: return "ReplWelcome";
    case MsgType::repl_eval: return "ReplEval";
    case MsgType::repl_result: return "ReplResult";
    case MsgType::repl_complete: return "ReplComplete";
    case MsgType::repl_completions: return "ReplCompletions";
    case MsgType::repl_bye: return "ReplBye";
    case MsgType::slice_report: return "SliceReport";
    case MsgType::slice_put: return "SlicePut";
    case MsgType::slice_fetch: return "SliceFetch";
    case MsgType::slice_done: return "SliceDone";
    case MsgType::step_patch: return "StepPatch";
  }
  return "unknown";
}

bool known_type(uint16_t t) { return type_name(MsgType(t)) != "unknown"; }

}  // namespace sal::wire

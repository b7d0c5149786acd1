// codec.h — framing and msgpack encoding of the messages in messages.h.
//
// A message is a ZeroMQ multipart: frame 0 is a 6-byte header ("SAL", protocol version, uint16
// type, big-endian), frame 1 the msgpack body (an array of the fields in declared order), and
// nothing else. A ROUTER socket sees the peer's routing id before frame 0. Decoding checks the
// header, the version, the type, the body size, msgpack limits (no allocation bombs), exact field
// count, every field's type and bound, and trailing bytes — and says which one failed.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <vector>

#include "core/result.h"
#include "wire/messages.h"

namespace sal::wire {

constexpr uint8_t kProtocolVersion = 16;  // 2: PlanUpdate carries the typed plan; 3: sparse snapshots in peers;
                                         // 4: the plan's data-parallel groups; 5: StepAbort names an abandoned plan;
                                         // 6: the plan's failure domains; 7: votes say where the time went;
                                         // 8: ReplHello carries a local endpoint's token and the client's directory;
                                         // 9: StepBegin carries the ranks' shares of the work;
                                         // 10: votes carry unit digests, FaultArm can corrupt a unit;
                                         // 11: SaveCheckpoint names the plan's ranks that are gone;
                                         // 12: the plan's racks; 13: votes carry the validation loss;
                                         // 14: StepBegin may keep a patch's arrangement (degraded steps),
                                         //     PlanUpdate names the plan whose intact planes may be kept;
                                         // 15: upstream logs of the experts' rows (SlicePut.logs, SliceFetch's
                                         //     log range), PlanUpdate's rebuild of lost experts from them;
                                         // 16: StepPatch names the damaged groups that rejoin the degraded steps
constexpr size_t kHeaderBytes = 6;
// ZMQ_MAXMSGSIZE on every control socket: larger frames are dropped by libzmq (and the peer
// disconnected) before they are buffered. Bigger than the largest bounded message (a 4 MiB REPL
// result plus framing), small enough that a hostile peer cannot make us hold much.
constexpr int64_t kMaxFrameBytes = 8 << 20;

using Parts = std::vector<zmq::message_t>;

struct Body;  // a decoded msgpack body; opaque outside codec.cpp

struct Envelope {
  MsgType type{};
  std::shared_ptr<const Body> body;
};

// Checks frames 0..1 of `parts` (routing id already removed). Errors carry an ErrorCode as code():
// bad_version for a version this build does not speak, malformed for everything else.
Result<Envelope> open(const Parts& parts);

template <class M>
Parts encode(const M& msg);

// Decodes the body as M; the envelope's type must be M::kType.
template <class M>
Result<M> decode(const Envelope& env);

// Encodes msg into a header frame + body frame appended to `out` (used for routed sends).
template <class M>
void encode_into(const M& msg, Parts& out);

// The header frame for a type (exposed for tests that forge frames).
zmq::message_t header_frame(MsgType t, uint8_t version = kProtocolVersion);

// "malformed", "bad version", ... for an error code (a log's kind of bad input); "other" otherwise.
const char* error_code_name(int code);

}  // namespace sal::wire

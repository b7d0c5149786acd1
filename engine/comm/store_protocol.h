// store_protocol.h — the wire format of the rendezvous store (StoreServer <-> StoreClient).
//
// A message is a ZeroMQ multipart; a ROUTER sees the peer's routing id first, which is not part of
// the format. Frames, in order:
//   0  header   4 bytes: 'S' 'K' 'V' version (kStoreVersion)
//   1  verb     1 byte  (Verb)
//   2  id       8 bytes, big-endian: chosen by the client, echoed in the reply
//   then, per verb:
//   set     3 key, 4 value
//   get     3 key, 4 timeout_ms (4 bytes, big-endian): answered as soon as the key exists
//   wait    3 timeout_ms, 4.. keys (1 to max_wait_keys): answered when every key exists
//   ok      nothing (reply to set and wait)
//   value   3 value (reply to get)
//   error   3 code (1 byte, StoreCode), 4 message (text)
// Decoding checks every frame count, size, verb and bound and says which one failed; a request that
// cannot be decoded gets an error reply (with id 0 when even the id was unreadable). Keys are
// non-empty byte strings; values may be empty.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::comm {

constexpr uint8_t kStoreVersion = 1;
constexpr size_t kStoreHeaderBytes = 4;

enum class Verb : uint8_t { set = 1, get = 2, wait = 3, ok = 0x81, value = 0x82, error = 0x83 };

// The code of an error reply; also Error::code() of decode failures and client-side errors.
enum class StoreCode : uint8_t {
  none = 0,
  malformed = 1,    // the request could not be decoded
  bad_version = 2,  // a header with another version
  too_large = 3,    // a key, value or key list over the limits
  full = 4,         // the store holds max_keys keys or max_total_bytes bytes
  timeout = 5,      // get/wait: the keys did not all appear in time
  erased = 6,       // get/wait: a key's prefix was erased (its epoch is over) while waiting
  busy = 7,         // too many waiting requests
  stopping = 8,     // the server is shutting down
  unreachable = 9,  // client side: no reply from the server in time
  interrupted = 10, // client side: StoreClient::interrupt() was called
};

const char* store_code_name(StoreCode c);

// Bounds on what the server accepts (and the client refuses to send).
struct StoreLimits {
  size_t max_key_bytes = 1024;
  size_t max_value_bytes = size_t(1) << 20;
  size_t max_keys = 100'000;
  size_t max_total_bytes = size_t(256) << 20;  // keys + values held
  size_t max_wait_keys = 1024;                 // keys in one wait request
  size_t max_waiters = 10'000;                 // get/wait requests parked at once
  uint32_t max_timeout_ms = 600'000;           // longer requested waits are shortened to this
};

// ZMQ_MAXMSGSIZE for both ends: one frame never exceeds the largest value.
inline int64_t store_max_frame(const StoreLimits& l) { return int64_t(l.max_value_bytes) + 64; }

struct StoreRequest {
  Verb verb = Verb::set;
  uint64_t id = 0;
  std::vector<std::string> keys;  // one for set/get, 1..max_wait_keys for wait
  std::vector<char> value;        // set only
  uint32_t timeout_ms = 0;        // get/wait only
};

struct StoreReply {
  Verb verb = Verb::ok;
  uint64_t id = 0;
  std::vector<char> value;  // value only
  StoreCode code = StoreCode::none;
  std::string message;      // error only
};

using Frames = std::vector<zmq::message_t>;

Frames encode_request(const StoreRequest& r);
Frames encode_reply(const StoreReply& r);

// Decodes a request (routing id already removed). On failure the Error's code() is a StoreCode,
// and `id_out` holds the request id when it could be read (0 otherwise), so the reply can carry it.
Result<StoreRequest> decode_request(const Frames& f, const StoreLimits& limits, uint64_t* id_out = nullptr);
Result<StoreReply> decode_reply(const Frames& f, const StoreLimits& limits);

// Checks a request against the limits before it is sent (the client's early, clear error).
Status check_request(const StoreRequest& r, const StoreLimits& limits);

StoreReply error_reply(uint64_t id, StoreCode code, std::string message);

// Receives one multipart message without blocking: false when none is waiting. Keeps at most
// `max_frames` frames and drains the rest, setting *truncated, so a message with a million frames
// costs a loop, not memory.
bool recv_frames(zmq::socket_t& s, Frames& out, size_t max_frames, bool* truncated);
// Sends frames without blocking; false when the peer's queue is full or it is gone.
bool send_frames(zmq::socket_t& s, Frames& frames);

}  // namespace sal::comm

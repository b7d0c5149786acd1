// store_protocol.cpp — see store_protocol.h. Encoders build frames from values; decoders take the
// frames apart one checked step at a time (count, header, verb, id, then the verb's frames) and
// name the frame that failed.
#include "comm/store_protocol.h"

#include <cstring>

namespace sal::comm {

namespace {

constexpr char kMagic[3] = {'S', 'K', 'V'};

// fail() with a StoreCode attached: coded(StoreCode::too_large, "key of ", n, " bytes").
template <class... Parts>
Error coded(StoreCode c, const Parts&... parts) {
  return Error(fail(parts...).message(), int(c));
}
template <class... Parts>
Error malformed(const Parts&... parts) {
  return coded(StoreCode::malformed, parts...);
}

zmq::message_t bytes_frame(const void* p, size_t n) { return zmq::message_t(p, n); }
zmq::message_t text_frame(const std::string& s) { return zmq::message_t(s.data(), s.size()); }

zmq::message_t be_frame(uint64_t v, size_t width) {
  uint8_t b[8];
  for (size_t i = 0; i < width; ++i) b[i] = uint8_t(v >> (8 * (width - 1 - i)));
  return zmq::message_t(b, width);
}

bool read_be(const zmq::message_t& m, size_t width, uint64_t* out) {
  if (m.size() != width) return false;
  auto* p = static_cast<const uint8_t*>(m.data());
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v = (v << 8) | p[i];
  *out = v;
  return true;
}

void push_head(Frames& f, Verb verb, uint64_t id) {
  uint8_t h[kStoreHeaderBytes] = {uint8_t(kMagic[0]), uint8_t(kMagic[1]), uint8_t(kMagic[2]), kStoreVersion};
  f.emplace_back(h, sizeof h);
  uint8_t v = uint8_t(verb);
  f.emplace_back(&v, 1);
  f.push_back(be_frame(id, 8));
}

// Frames 0..2: header, verb, id. Fills verb and id; errors say which frame was wrong.
Status decode_head(const Frames& f, Verb* verb, uint64_t* id) {
  if (f.size() < 3) return malformed("expected at least 3 frames, got ", f.size());
  const auto& h = f[0];
  if (h.size() != kStoreHeaderBytes || std::memcmp(h.data(), kMagic, 3) != 0) {
    return malformed("frame 0: not a store header (expected 'SKV' + version)");
  }
  uint8_t version = static_cast<const uint8_t*>(h.data())[3];
  if (version != kStoreVersion) {
    return coded(StoreCode::bad_version,
                 "frame 0: store protocol version ", int(version), ", this build speaks ", int(kStoreVersion));
  }
  if (f[1].size() != 1) return malformed("frame 1 (verb): expected 1 byte, got ", f[1].size());
  *verb = Verb(*static_cast<const uint8_t*>(f[1].data()));
  if (!read_be(f[2], 8, id)) return malformed("frame 2 (id): expected 8 bytes, got ", f[2].size());
  return ok_status();
}

Result<std::string> decode_key(const zmq::message_t& m, size_t index, const StoreLimits& l) {
  if (m.size() == 0) return malformed("frame ", index, " (key): empty key");
  if (m.size() > l.max_key_bytes) {
    return coded(StoreCode::too_large,
                 "frame ", index, " (key): ", m.size(), " bytes, limit ", l.max_key_bytes);
  }
  return std::string(static_cast<const char*>(m.data()), m.size());
}

Result<std::vector<char>> decode_value(const zmq::message_t& m, size_t index, const StoreLimits& l) {
  if (m.size() > l.max_value_bytes) {
    return coded(StoreCode::too_large,
                 "frame ", index, " (value): ", m.size(), " bytes, limit ", l.max_value_bytes);
  }
  auto* p = static_cast<const char*>(m.data());
  return std::vector<char>(p, p + m.size());
}

Result<uint32_t> decode_timeout(const zmq::message_t& m, size_t index) {
  uint64_t t = 0;
  if (!read_be(m, 4, &t)) {
    return malformed("frame ", index, " (timeout_ms): expected 4 bytes, got ", m.size());
  }
  return uint32_t(t);
}

Status expect_frames(const Frames& f, size_t n, const char* verb) {
  if (f.size() != n) return malformed(verb, ": expected ", n, " frames, got ", f.size());
  return ok_status();
}

Result<StoreRequest> decode_set(const Frames& f, StoreRequest r, const StoreLimits& l) {
  SAL_TRY(expect_frames(f, 5, "set"));
  auto key = decode_key(f[3], 3, l);
  if (!key) return key.error();
  auto value = decode_value(f[4], 4, l);
  if (!value) return value.error();
  r.keys.push_back(std::move(*key));
  r.value = std::move(*value);
  return r;
}

Result<StoreRequest> decode_get(const Frames& f, StoreRequest r, const StoreLimits& l) {
  SAL_TRY(expect_frames(f, 5, "get"));
  auto key = decode_key(f[3], 3, l);
  if (!key) return key.error();
  auto t = decode_timeout(f[4], 4);
  if (!t) return t.error();
  r.keys.push_back(std::move(*key));
  r.timeout_ms = *t;
  return r;
}

Result<StoreRequest> decode_wait(const Frames& f, StoreRequest r, const StoreLimits& l) {
  if (f.size() < 5) return malformed("wait: expected at least 5 frames, got ", f.size());
  size_t n = f.size() - 4;
  if (n > l.max_wait_keys) {
    return coded(StoreCode::too_large, "wait: ", n, " keys, limit ", l.max_wait_keys);
  }
  auto t = decode_timeout(f[3], 3);
  if (!t) return t.error();
  r.timeout_ms = *t;
  for (size_t i = 4; i < f.size(); ++i) {
    auto key = decode_key(f[i], i, l);
    if (!key) return key.error();
    r.keys.push_back(std::move(*key));
  }
  return r;
}

}  // namespace

const char* store_code_name(StoreCode c) {
  switch (c) {
    case StoreCode::none: return "none";
    case StoreCode::malformed: return "malformed";
    case StoreCode::bad_version: return "bad_version";
    case StoreCode::too_large: return "too_large";
    case StoreCode::full: return "full";
    case StoreCode::timeout: return "timeout";
    case StoreCode::erased: return "erased";
    case StoreCode::busy: return "busy";
    case StoreCode::stopping: return "stopping";
    case StoreCode::unreachable: return "unreachable";
    case StoreCode::interrupted: return "interrupted";
  }
  return "unknown";
}

Frames encode_request(const StoreRequest& r) {
  Frames f;
  push_head(f, r.verb, r.id);
  switch (r.verb) {
    case Verb::set:
      f.push_back(text_frame(r.keys.empty() ? std::string() : r.keys[0]));
      f.push_back(bytes_frame(r.value.data(), r.value.size()));
      break;
    case Verb::get:
      f.push_back(text_frame(r.keys.empty() ? std::string() : r.keys[0]));
      f.push_back(be_frame(r.timeout_ms, 4));
      break;
    case Verb::wait:
      f.push_back(be_frame(r.timeout_ms, 4));
      for (const auto& k : r.keys) f.push_back(text_frame(k));
      break;
    default:
      break;  // not a request verb: the server answers "unknown verb"
  }
  return f;
}

Frames encode_reply(const StoreReply& r) {
  Frames f;
  push_head(f, r.verb, r.id);
  if (r.verb == Verb::value) f.push_back(bytes_frame(r.value.data(), r.value.size()));
  if (r.verb == Verb::error) {
    uint8_t c = uint8_t(r.code);
    f.emplace_back(&c, 1);
    f.push_back(text_frame(r.message));
  }
  return f;
}

Result<StoreRequest> decode_request(const Frames& f, const StoreLimits& l, uint64_t* id_out) {
  if (id_out) *id_out = 0;
  StoreRequest r;
  SAL_TRY(decode_head(f, &r.verb, &r.id));
  if (id_out) *id_out = r.id;
  switch (r.verb) {
    case Verb::set: return decode_set(f, std::move(r), l);
    case Verb::get: return decode_get(f, std::move(r), l);
    case Verb::wait: return decode_wait(f, std::move(r), l);
    default: return malformed("frame 1 (verb): unknown request verb ", int(r.verb));
  }
}

Result<StoreReply> decode_reply(const Frames& f, const StoreLimits& l) {
  StoreReply r;
  SAL_TRY(decode_head(f, &r.verb, &r.id));
  switch (r.verb) {
    case Verb::ok:
      SAL_TRY(expect_frames(f, 3, "ok"));
      return r;
    case Verb::value: {
      SAL_TRY(expect_frames(f, 4, "value"));
      auto v = decode_value(f[3], 3, l);
      if (!v) return v.error();
      r.value = std::move(*v);
      return r;
    }
    case Verb::error: {
      SAL_TRY(expect_frames(f, 5, "error"));
      if (f[3].size() != 1) return malformed("error: frame 3 (code): expected 1 byte");
      r.code = StoreCode(*static_cast<const uint8_t*>(f[3].data()));
      if (f[4].size() > 64 * 1024) return malformed("error: frame 4 (message): over 64 KiB");
      r.message.assign(static_cast<const char*>(f[4].data()), f[4].size());
      return r;
    }
    default: return malformed("frame 1 (verb): unknown reply verb ", int(r.verb));
  }
}

Status check_request(const StoreRequest& r, const StoreLimits& l) {
  if (r.verb == Verb::wait && (r.keys.empty() || r.keys.size() > l.max_wait_keys)) {
    return coded(StoreCode::too_large, "wait for ", r.keys.size(), " keys: allowed 1 to ", l.max_wait_keys);
  }
  if (r.verb != Verb::wait && r.keys.size() != 1) return malformed("set/get take exactly one key");
  for (const auto& k : r.keys) {
    if (k.empty()) return malformed("empty key");
    if (k.size() > l.max_key_bytes) {
      return coded(StoreCode::too_large, "key of ", k.size(), " bytes, limit ", l.max_key_bytes);
    }
  }
  if (r.value.size() > l.max_value_bytes) {
    return coded(StoreCode::too_large,
                 "value of ", r.value.size(), " bytes for key '", r.keys[0], "', limit ", l.max_value_bytes);
  }
  return ok_status();
}

StoreReply error_reply(uint64_t id, StoreCode code, std::string message) {
  StoreReply r;
  r.verb = Verb::error;
  r.id = id;
  r.code = code;
  r.message = std::move(message);
  return r;
}

bool recv_frames(zmq::socket_t& s, Frames& out, size_t max_frames, bool* truncated) {
  out.clear();
  *truncated = false;
  for (;;) {
    zmq::message_t m;
    auto got = s.recv(m, zmq::recv_flags::dontwait);
    if (!got) return !out.empty() || *truncated;  // nothing waiting (only possible before frame 0)
    bool more = m.more();
    if (out.size() < max_frames) {
      out.push_back(std::move(m));
    } else {
      *truncated = true;
    }
    if (!more) return true;
  }
}

bool send_frames(zmq::socket_t& s, Frames& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    auto flags = zmq::send_flags::dontwait;
    if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
    try {
      if (!s.send(frames[i], flags)) return false;
    } catch (const zmq::error_t&) {
      return false;
    }
  }
  return true;
}

}  // namespace sal::comm

// fuzz_store.cpp — the rendezvous store's frames as a peer sends them. The input is cut into frames
// at each "\n--\n" (so a fuzzer can add and drop frames); decode_request and decode_reply must
// refuse or accept, and an accepted request or reply must survive encode -> decode unchanged.
#include <string_view>

#include "comm/store_protocol.h"
#include "fuzz/targets.h"

namespace sal::fuzz {
namespace {

using namespace sal::comm;

Frames frames_of(std::string_view in) {
  Frames f;
  constexpr std::string_view kCut = "\n--\n";
  for (size_t at = 0;;) {
    size_t next = in.find(kCut, at);
    std::string_view part = in.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    f.emplace_back(part.data(), part.size());
    if (next == std::string_view::npos || f.size() > 2000) break;
    at = next + kCut.size();
  }
  return f;
}

bool same(const StoreRequest& a, const StoreRequest& b) {
  return a.verb == b.verb && a.id == b.id && a.keys == b.keys && a.value == b.value && a.timeout_ms == b.timeout_ms;
}

bool same(const StoreReply& a, const StoreReply& b) {
  return a.verb == b.verb && a.id == b.id && a.value == b.value && a.code == b.code && a.message == b.message;
}

}  // namespace

int store(const uint8_t* data, size_t size) {
  StoreLimits limits;
  limits.max_value_bytes = 1 << 16;
  limits.max_wait_keys = 64;
  Frames f = frames_of({reinterpret_cast<const char*>(data), size});
  uint64_t id = 0;
  if (auto r = decode_request(f, limits, &id)) {
    auto again = decode_request(encode_request(*r), limits);
    if (!again || !same(*r, *again)) __builtin_trap();
  }
  if (auto r = decode_reply(f, limits)) {
    auto again = decode_reply(encode_reply(*r), limits);
    if (!again || !same(*r, *again)) __builtin_trap();
  }
  return 0;
}

}  // namespace sal::fuzz

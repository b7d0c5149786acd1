// slice_mac.cpp — see slice_mac.h.
#include "ckpt/slice_mac.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::ckpt {
namespace {

// Bound into every MAC, so a MAC made for anything else with the same key never passes.
constexpr char kContext[] = "salamander sparse snapshot slice v1";
constexpr const char* kKeyFile = "slice.key";

// A slot's last frame: a fresh random nonce, then the Poly1305 tag.
constexpr size_t kNonce = crypto_stream_xchacha20_NONCEBYTES;
constexpr size_t kTag = crypto_onetimeauth_BYTES;
constexpr size_t kFrame = kNonce + kTag;
using Tag = std::array<uint8_t, kTag>;

// Poly1305 over the context and every frame before `count` (each with its length), under the
// one-time key that XChaCha20 draws from the job's key and `nonce` (a key used for one slot only,
// as Poly1305 requires; about 4x BLAKE2b's speed, which showed in the agents' CPU at every put).
Tag mac_of(const wire::Parts& parts, size_t count, const uint8_t* nonce, const SliceMacKey& key) {
  std::array<uint8_t, crypto_onetimeauth_KEYBYTES> once{};
  crypto_stream_xchacha20(once.data(), once.size(), nonce, key.bytes.data());
  crypto_onetimeauth_state st;
  crypto_onetimeauth_init(&st, once.data());
  crypto_onetimeauth_update(&st, reinterpret_cast<const uint8_t*>(kContext), sizeof kContext);
  for (size_t i = 0; i < count; ++i) {
    uint64_t n = parts[i].size();
    uint8_t len[8];
    for (int b = 0; b < 8; ++b) len[b] = uint8_t(n >> (8 * b));
    crypto_onetimeauth_update(&st, len, sizeof len);
    crypto_onetimeauth_update(&st, static_cast<const uint8_t*>(parts[i].data()), n);
  }
  Tag out{};
  crypto_onetimeauth_final(&st, out.data());
  sodium_memzero(once.data(), once.size());
  return out;
}

void ensure_sodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) std::abort();  // no randomness: nothing here can be keyed safely
}

}  // namespace

std::string SliceMacKey::hex() const {
  std::string out(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes.data(), bytes.size());
  out.pop_back();
  return out;
}

SliceMacKey new_slice_mac_key() {
  ensure_sodium();
  SliceMacKey k;
  randombytes_buf(k.bytes.data(), k.bytes.size());
  return k;
}

Result<SliceMacKey> parse_slice_mac_key(const std::string& hex) {
  SliceMacKey k;
  size_t got = 0;
  if (hex.size() != k.bytes.size() * 2 ||
      sodium_hex2bin(k.bytes.data(), k.bytes.size(), hex.data(), hex.size(), nullptr, &got, nullptr) != 0 ||
      got != k.bytes.size())
    return fail("a slice key is 64 hex digits, got ", hex.size(), " characters");
  return k;
}

Result<SliceMacKey> run_slice_mac_key(const std::string& run_dir) {
  if (run_dir.empty() || !path_exists(run_dir)) return new_slice_mac_key();
  const std::string path = run_dir + "/" + kKeyFile;
  if (path_exists(path)) {
    auto text = read_file(path, 1024);
    if (!text) return text.error();
    auto k = parse_slice_mac_key(std::string(trim(*text)));
    if (!k) return k.error().with_context(path);
    return k;
  }
  SliceMacKey k = new_slice_mac_key();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return fail(path, ": cannot create the run's slice key");
  std::string line = k.hex() + "\n";
  bool written = ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  ::close(fd);
  if (!written) return fail(path, ": cannot write the run's slice key");
  return k;
}

void seal(wire::Parts& parts, const SliceMacKey& key) {
  ensure_sodium();
  std::array<uint8_t, kFrame> frame{};
  randombytes_buf(frame.data(), kNonce);
  Tag tag = mac_of(parts, parts.size(), frame.data(), key);
  std::copy(tag.begin(), tag.end(), frame.begin() + kNonce);
  parts.emplace_back(frame.data(), frame.size());
}

Status unseal(wire::Parts& parts, const SliceMacKey& key) {
  ensure_sodium();  // the CPU's fastest Poly1305 (3.9 GB/s here, the portable one 2.2), not ZeroMQ's doing
  if (parts.empty() || parts.back().size() != kFrame)
    return fail("the slot carries no MAC: not written by this job's workers");
  const auto* frame = static_cast<const uint8_t*>(parts.back().data());
  Tag tag = mac_of(parts, parts.size() - 1, frame, key);
  if (sodium_memcmp(tag.data(), frame + kNonce, kTag) != 0)
    return fail("the slot's MAC does not match: not written by this job's workers, or changed since");
  parts.pop_back();
  return {};
}

}  // namespace sal::ckpt

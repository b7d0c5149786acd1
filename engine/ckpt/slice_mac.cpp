// slice_mac.cpp — see slice_mac.h.
#include "ckpt/slice_mac.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cstdio>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::ckpt {
namespace {

// Bound into every MAC, so a MAC made for anything else with the same key never passes.
constexpr char kContext[] = "salamander sparse snapshot slice v1";
constexpr const char* kKeyFile = "slice.key";

std::array<uint8_t, crypto_generichash_BYTES> mac_of(const wire::Parts& parts, size_t count, const SliceMacKey& key) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, key.bytes.data(), key.bytes.size(), crypto_generichash_BYTES);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(kContext), sizeof kContext);
  for (size_t i = 0; i < count; ++i) {
    uint64_t n = parts[i].size();
    uint8_t len[8];
    for (int b = 0; b < 8; ++b) len[b] = uint8_t(n >> (8 * b));
    crypto_generichash_update(&st, len, sizeof len);
    crypto_generichash_update(&st, static_cast<const uint8_t*>(parts[i].data()), n);
  }
  std::array<uint8_t, crypto_generichash_BYTES> out{};
  crypto_generichash_final(&st, out.data(), out.size());
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
  auto mac = mac_of(parts, parts.size(), key);
  parts.emplace_back(mac.data(), mac.size());
}

Status unseal(wire::Parts& parts, const SliceMacKey& key) {
  if (parts.empty() || parts.back().size() != crypto_generichash_BYTES)
    return fail("the slot carries no MAC: not written by this job's workers");
  auto mac = mac_of(parts, parts.size() - 1, key);
  if (sodium_memcmp(mac.data(), parts.back().data(), mac.size()) != 0)
    return fail("the slot's MAC does not match: not written by this job's workers, or changed since");
  parts.pop_back();
  return {};
}

}  // namespace sal::ckpt

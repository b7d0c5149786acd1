// slice_mac.h — the keyed MAC on sparse snapshot slices (issue 34). A slot a worker puts into its
// peers' agents, and every slot an agent serves back to a restoring worker, carries a last frame:
// a random nonce and a Poly1305 tag over every frame before it (each with its length), under a
// one-time key XChaCha20 draws from the job's secret and that nonce. A slot not written by this job's workers — forged, or changed in flight or in a
// holder's memory — fails the check, which the FNV checksums alone would not catch (they detect
// damage, not forgery). The secret is made by the controller, kept in the run directory (so a
// controller resumed from it keeps it: the agents' slots stay readable), and travels in JobSpec
// over the mesh (CURVE beyond loopback) and the agents' worker endpoints (this host only).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/result.h"
#include "wire/codec.h"

namespace sal::ckpt {

struct SliceMacKey {
  std::array<uint8_t, 32> bytes{};
  std::string hex() const;
};

// A fresh random key (libsodium's generator).
SliceMacKey new_slice_mac_key();
// A key from its 64 hex digits (JobSpec.slice_mac_key).
Result<SliceMacKey> parse_slice_mac_key(const std::string& hex);
// The run's key: `run_dir`/slice.key, made (mode 0600) the first time; a fresh one without a run
// directory (such a controller cannot be resumed either).
Result<SliceMacKey> run_slice_mac_key(const std::string& run_dir);

// Appends the MAC of `parts` as their last frame.
void seal(wire::Parts& parts, const SliceMacKey& key);
// Checks the last frame against the MAC of the others and removes it; the error says it does not
// match (or is missing) — the slot was not written by this job's workers.
Status unseal(wire::Parts& parts, const SliceMacKey& key);

}  // namespace sal::ckpt

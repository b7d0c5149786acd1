// slice_frames.h — a sparse snapshot slot (ckpt/sparse.h) as the frames of a wire::SlicePut: the
// header and body, then each unit's weights and (a full copy) both moments, as raw floats. An
// upstream log (model/expert_replay.h) travels the same way: a log-only SlicePut whose frames are
// each expert's input rows and their gradients. Decoding
// checks the body (wire/codec.h), that every unit is a unit of the model with the size the model
// gives it, and that the frames are exactly those the body announces; the checksums are left to
// the receiver (an agent refuses a damaged slot; a worker restoring skips to the next replica).
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "ckpt/slice_store.h"
#include "wire/codec.h"

namespace sal::ckpt {

// `head`'s fields but its units, then the slot's copies (head.units is filled from them).
wire::Parts encode_slot(wire::SlicePut head, const SlotView& slot);
wire::Parts encode_slot(wire::SlicePut head, const SparseSlot& slot);

// An iteration's upstream log, `rows` of it (any subset), as a log-only SlicePut: `head`'s fields
// but its units and logs, each entry's checksum from `checksums` where given, else computed.
using LogRows = std::vector<std::pair<model::LogKey, const model::SentRows*>>;
wire::Parts encode_log(wire::SlicePut head, const LogRows& rows, const std::map<model::LogKey, uint64_t>& checksums = {});

struct DecodedSlot {
  wire::SlicePut head;
  SparseSlot slot;
  model::IterationLog log;                      // a log-only SlicePut's rows
  std::map<model::LogKey, uint64_t> checksums;  // ... and the checksums the writer took of them
};
// The entries of a decoded log whose floats do not match their checksums (empty: all sound).
std::vector<model::LogKey> damaged_logs(const DecodedSlot& d);
// `parts` without a routing id; their float frames are copied into the slot.
Result<DecodedSlot> decode_slot(const wire::Parts& parts, const ModelShape& shape);
// The same for a peer that does not know the model's shape (an agent): sizes are checked against
// each other only.
Result<DecodedSlot> decode_slot(const wire::Parts& parts);

}  // namespace sal::ckpt

// slice_frames.h — a sparse snapshot slot (ckpt/sparse.h) as the frames of a wire::SlicePut: the
// header and body, then each unit's weights and (a full copy) both moments, as raw floats. An
// upstream log (model/expert_replay.h) travels the same way: a log-only SlicePut whose body names
// each expert's assignments and whose frames are each layer's tokens (inputs, gradients, weights). Decoding
// checks the body (wire/codec.h), that every unit is a unit of the model with the size the model
// gives it, and that the frames are exactly those the body announces; the checksums are left to
// the receiver (an agent refuses a damaged slot; a worker restoring skips to the next replica).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ckpt/slice_store.h"
#include "wire/codec.h"

namespace sal::ckpt {

// `head`'s fields but its units, then the slot's copies (head.units is filled from them).
wire::Parts encode_slot(wire::SlicePut head, const SlotView& slot);
wire::Parts encode_slot(wire::SlicePut head, const SparseSlot& slot);

// Some of an iteration's upstream log (any experts, and the layers' tokens they use) as a log-only
// SlicePut: `head`'s fields but its units and logs, each part's checksum as it holds it (computed
// where it holds none).
struct LogView {
  std::vector<std::pair<model::LogKey, const model::SentRows*>> rows;
  std::vector<std::pair<model::TokenKey, const model::TokenRows*>> tokens;
};
LogView whole(const model::IterationLog& log);
wire::Parts encode_log(wire::SlicePut head, const LogView& log);

struct DecodedSlot {
  wire::SlicePut head;
  SparseSlot slot;
  model::IterationLog log;  // a log-only SlicePut's, with the checksums the writer took
};
// The parts of a decoded log that do not match their checksums, in words ("layer 1 expert 3",
// "layer 1's tokens"; empty: all sound).
std::vector<std::string> damaged_logs(const DecodedSlot& d);
// `parts` without a routing id; their float frames are copied into the slot.
Result<DecodedSlot> decode_slot(const wire::Parts& parts, const ModelShape& shape);
// The same for a peer that does not know the model's shape (an agent): sizes are checked against
// each other only.
Result<DecodedSlot> decode_slot(const wire::Parts& parts);

}  // namespace sal::ckpt

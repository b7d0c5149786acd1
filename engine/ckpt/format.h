// format.h — dense checkpoints on disk: one file per model unit (weights and AdamW moments) plus a
// manifest naming the step. Each unit is written by exactly one worker (one of its holders, the
// writing spread over the ranks: plan/unit_writers.h), so a checkpoint of a plan spread over many
// workers is complete and has no duplicates. `salamander sample` reads one back into a single
// process; the recovery ladder's last rung restores from it.
//
// Unit file: "SALUNIT2", then uint32 kind, int32 layer, int32 expert, uint64 length (floats),
// uint64 step, then the weights, the first and the second moments (3 x length floats, little-endian),
// then a uint64 digest of those three (core/digest.h, chained): a unit whose bits changed on disk is
// refused, naming its file. "SALUNIT1" files (no digest) are still read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "ckpt/book.h"
#include "model/params.h"

namespace sal::ckpt {

using model::Dims;
using model::Params;
using model::Unit;

std::string unit_file(const std::string& dir, const UnitId& id);

Status write_unit(const std::string& dir, const Unit& u, uint64_t step);
// The same file from a view: the values and moments go to disk from where they lie.
Status write_unit(const std::string& dir, const model::UnitView& u, uint64_t step);
// `step`, when given, receives the step the unit was written at.
Result<Unit> read_unit(const std::string& path, const Dims& dims, uint64_t* step = nullptr);

// The manifest: "step <n>", "units <count>", the model's shape ("layers 2", "d_model 64", ...) and
// how its token ids were made ("tokens bytes", "tokens uint16" or "tokens uint32": the job's data.format), one per
// line. Written last, so a checkpoint without one is incomplete. Manifests written before the
// tokens line existed have none: `tokens` is then empty.
struct Manifest {
  uint64_t step = 0;
  size_t units = 0;
  Dims dims;
  std::string tokens;  // "bytes", "uint16", "uint32", or "" (not recorded)
};
Status write_manifest(const std::string& dir, uint64_t step, size_t units, const Dims& dims,
                      const std::string& tokens = "");
Result<Manifest> read_manifest(const std::string& dir);

// The checkpoint a user names: a checkpoint or complete snapshot directory (one with a manifest),
// or a run directory — its final checkpoint (RUN/checkpoint), else its newest complete snapshot
// (RUN/snapshots/step-N). What `run --resume`, `sample` and `export` take. The error says why
// `path` is none of them.
Result<std::string> resolve_checkpoint(const std::string& path);

// A dense snapshot is complete once every unit is written: its marker ("complete", naming the step
// and the units) says so on disk. remove_snapshot() deletes a snapshot's directory.
Status mark_complete(const Snapshot& s);
Status remove_snapshot(const std::string& dir);
// Removes every snapshot directory under `root` (<run>/snapshots) that has no `complete` marker:
// what a rank that left, or a stop, left half written. Returns the directories removed. For the
// end of a job, once no worker writes any more.
std::vector<std::string> remove_incomplete_snapshots(const std::string& root);

// Every unit of a model with all its experts, in the shape its manifest records (for sampling, or
// restoring the whole model).
Result<Params> load_all(const std::string& dir);

}  // namespace sal::ckpt

// relaunch.h — a worker that starts again as a new process image of itself, for the baselines'
// restores (train.restart = "relaunch"): the systems fixed-ep-ft and checkpoint-restart stand for
// restart the job to restore a checkpoint, so every worker of such a plan pays what a new process
// pays — the program loaded again, the job read and its model and corpus set up, every data plane
// connected anew — before it reads the snapshot.
//
// The worker keeps its pid (and so its agent's supervision, its CPU cgroup and its death with the
// agent): relaunch() writes the plan it must apply into an anonymous memory file the new image
// inherits, marks every other descriptor but standard input, output and error close-on-exec (the
// old image's sockets and shared-memory segments end with it), and replaces the process image with
// /proc/self/exe run with the same arguments plus `--pending-plan-fd N --relaunched-at NS`. The new
// image reads the plan back (take_pending) and applies it once its job has arrived.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "wire/codec.h"

namespace sal::runtime {

// Returns only on failure, with the reason.
Status relaunch(const wire::Parts& pending);

// The memory file relaunch() leaves the new image: `frames`, inheritable (not close-on-exec).
Result<int> pending_file(const wire::Parts& frames);

// The new image's side: the frames relaunch() wrote, from descriptor `fd` (closed after). A file
// that ends early or claims more than a message may hold is an error naming the descriptor.
Result<wire::Parts> take_pending(int fd);

}  // namespace sal::runtime

// worker.h — the worker process (`salamander worker`, started by its agent, one per device).
//
// Today the worker runs the control half of a training step and nothing else: it joins its agent,
// reports ready, answers each StepBegin with a vote, follows commits and aborts, and obeys stop
// and drain. The model, the data plane and the optimizer arrive with the training runtime; they
// slot in between StepBegin and the vote. The worker dies with its agent (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace sal::runtime {

struct WorkerOptions {
  std::string agent;        // the agent's local endpoint
  uint32_t index = 0;       // worker index on its node
  std::string device;       // "cpu:0", "cuda:1"
  uint32_t node = 0;        // node id (for log lines)
  pid_t parent_pid = 0;     // the agent: we die with it
  int64_t heartbeat_ms = 100;
};

// Runs until stopped; returns the process exit code.
int run_worker(const WorkerOptions& opts);

}  // namespace sal::runtime

// worker.h — the worker process (`salamander worker`, started by its agent, one per device).
//
// Two threads. The control loop talks to the agent: it reports liveness every heartbeat, passes the
// controller's requests (the job, plans, steps, commits, aborts, checkpoint saves) to the training
// thread (trainer_thread.h) and forwards its answers, and obeys stop and drain. A StepAbort also
// ends the plan's data plane, so a collective blocked on a lost peer returns at once. A plan that
// says relaunch (the baselines' restores) makes the worker start again as a new process image that
// applies it (relaunch.h): ready to the agent throughout, since it is applying a plan. The worker
// dies with its agent (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "runtime/trainer_thread.h"

namespace sal::runtime {

struct WorkerOptions {
  std::string agent;        // the agent's local endpoint
  uint32_t index = 0;       // worker index on its node
  std::string device;       // "cpu:0", "cuda:1"
  uint32_t node = 0;        // node id (for log lines)
  pid_t parent_pid = 0;     // the agent: we die with it
  int64_t heartbeat_ms = 100;
  JobLoader load_job;       // job file text -> TrainSpec (cmd_worker supplies it)
  DeviceFactory cuda;       // opens GPU N for a cuda:N device (empty: a build without CUDA)
  int pending_plan_fd = -1;    // a relaunched worker's plan to apply (relaunch.h); -1: none
  int64_t relaunched_at_ns = 0;  // when the image before it relaunched (mono_ns)
};

// Runs until stopped; returns the process exit code (1 when training could not start).
int run_worker(const WorkerOptions& opts);

}  // namespace sal::runtime

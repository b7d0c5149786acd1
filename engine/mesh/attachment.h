// attachment.h — what the layers above the mesh attach to a controller: the operators' console
// (engine/console: the REPL endpoint) and the metrics export (engine/metrics: the Prometheus
// endpoint). The controller makes each from ControllerOptions::attach when it starts (once its
// security is set up, before its policies load, so their first events are seen), names their
// endpoints beside its own, and tells each what it records as it happens. The mesh knows nothing
// of what they are: no include runs from engine/mesh up to them.
#pragma once

#include <uv.h>
#include <zmq.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/result.h"
#include "job/journal.h"
#include "policy/decision.h"

namespace sal::wire {
struct KeyPair;
}

namespace sal::mesh {

class Controller;
class Allowlist;

// Where an attachment serves: "repl" at "tcp://127.0.0.1:5555".
struct AttachedEndpoint {
  std::string name;
  std::string url;
};

class Attachment {
 public:
  virtual ~Attachment() = default;
  // Where it serves (no name: nowhere).
  virtual AttachedEndpoint endpoint() const { return {}; }
  // The controller's state changed: after each batch of the driver's actions, each mesh message,
  // each operator action.
  virtual void state_changed() {}
  // What the controller recorded: an event (events.csv), a policy slot's decision (0 ms: the C++
  // floor), a plan decided (the planner's whole time), a recovery that ended, a dense snapshot
  // completed.
  virtual void event(const std::string& kind) { (void)kind; }
  virtual void policy_decision(policy::Kind slot, double ms) { (void)slot, (void)ms; }
  virtual void plan_decided(double ms) { (void)ms; }
  virtual void recovery(double seconds, double capacity_wait_s) { (void)seconds, (void)capacity_wait_s; }
  virtual void snapshot_complete(uint64_t step) { (void)step; }
  // A resumed job (the controller restarted): what the run counted before this controller — its
  // journal's record (recoveries, aborted steps, corrupt copies) and its events.csv's events by
  // kind — told once, before anything new, so that totals go on from where they were.
  virtual void resumed(const job::JournalState& before, const std::map<std::string, uint64_t>& events) {
    (void)before, (void)events;
  }
};

// What an attachment is made with: the controller, its loop and ZeroMQ context, and its CURVE
// server key and operator allowlist (null where every endpoint is local).
struct AttachContext {
  Controller& controller;
  uv_loop_t* loop;
  zmq::context_t& ctx;
  const wire::KeyPair* curve = nullptr;
  const Allowlist* allow = nullptr;
};

// Makes and starts one attachment (binds its endpoint); the error says why it could not.
using Attach = std::function<Result<std::unique_ptr<Attachment>>(const AttachContext&)>;

}  // namespace sal::mesh

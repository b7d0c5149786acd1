// slice_server.h — an agent's slice endpoint: where the node holds other workers' sparse snapshots
// (MoEtion's copies in peers' memory) in host memory, so that they survive the worker that wrote
// them and its node. Workers put each slot they take (wire::SlicePut, floats in frames:
// ckpt/slice_frames.h); the store (ckpt/slice_store.h) keeps each writer's newest complete window
// within the job's budget (checkpoint.peer_memory_mb) and refuses, with the rule, a damaged slot
// or one past the budget. A worker restoring from peers fetches the slots of a window
// (wire::SliceFetch: one SlicePut per slot, then SliceDone). When a window completes `on_report`
// gets a SliceReport for the controller — at most one each kReportEveryMs (a window of one slot
// completes every iteration; the last change is sent when the interval is over) — and at once
// when the store refused something.
//
// The endpoint is a ROUTER on the agent's data host with a port of the kernel's choosing; off
// loopback it is a CURVE server with the agent's own key pair (its public key goes to the
// controller with RegisterNode, and from there to the workers that connect) on the ZAP domain
// salamander-slices, where the endpoint's ZAP handler admits only the job's node keys (the agent
// learns them with Welcome and passes them on: set_allowlist). Every slot carries the job's keyed
// MAC (ckpt/slice_mac.h): a put without it is refused, and what a fetch answers is sealed with it.
//
// It runs on a thread of its own, not the agent's loop, and with a ZeroMQ context of its own (its
// own I/O thread and ZAP handler): receiving, decoding, checking and storing slots of megabytes, and
// answering a fetch of a whole window, take time that the agent's heartbeats — on the agent's
// context — must never wait for. The loop thread sets the node, the budget and the allowlist and
// reads report() (under the store's mutex); the reports the thread makes reach on_report on the loop
// thread (a uv_async).
//
// Test hook: SAL_TEST_CORRUPT_SLICE=<unit name>[@<node id>] (e.g. "layer0.expert1@3") in the
// agent's environment flips one bit of every copy of that unit the store accepts — after the
// checksum was checked — as memory going bad would; with @ID, only in the agent of that node id.
#pragma once

#include <uv.h>
#include <zmq.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/slice_frames.h"
#include "ckpt/slice_mac.h"
#include "ckpt/slice_store.h"
#include "core/result.h"
#include "mesh/security.h"
#include "wire/codec.h"

namespace sal::mesh {

class SliceServer {
 public:
  // Binds tcp://HOST:* (CURVE with the key pair in `key_file` unless HOST is local) and starts the
  // endpoint's thread; reports reach on_report on `loop`'s thread.
  static Result<std::unique_ptr<SliceServer>> open(uv_loop_t* loop, const std::string& host, const std::string& key_file);
  ~SliceServer();  // on the loop's thread: stops and joins the endpoint's thread

  const std::string& endpoint() const { return endpoint_; }
  const std::string& public_key() const { return public_key_; }  // "" where local
  // Our node id (reports carry it) and the budget the job gives (PlanUpdate.slice_budget).
  void set_node(uint32_t node);
  // The job's slice key (JobSpec.slice_mac_key): slots put without its MAC are refused, and the
  // slots served carry it. Until it is known every put is refused.
  void set_mac_key(const ckpt::SliceMacKey& key);
  void set_budget(uint64_t bytes);
  // Who may connect where the endpoint is CURVE (the job's node keys, learned with Welcome); until
  // then nobody. Nothing where it is local.
  void set_allowlist(Allowlist allow);
  wire::SliceReport report() const;
  std::function<void(const wire::SliceReport&)> on_report;
  static constexpr int64_t kReportEveryMs = 100;

 private:
  SliceServer();
  void run();
  void on_message();
  // Hands the reports made on the endpoint's thread to on_report on the loop's.
  void deliver();
  wire::SliceReport report_locked() const;
  void put(wire::Parts parts);
  void fetch(const std::string& rid, const wire::SliceFetch& f);
  void fetch_logs(const std::string& rid, const wire::SliceFetch& f);
  Status add_log(ckpt::DecodedSlot d);  // under mu_
  void send(const std::string& rid, wire::Parts parts);
  void corrupt_for_test(const ckpt::Writer& w, uint64_t step, const std::vector<UnitId>& ids);
  void changed(const std::string& refusal = "");
  void send_report(const std::string& refusal);

  zmq::context_t ctx_{1};              // the endpoint's own (declared first: closed last)
  std::unique_ptr<ZapHandler> zap_;    // CURVE's admissions on ctx_, where the endpoint is not local
  zmq::socket_t sock_;                 // the endpoint's thread's only
  std::string endpoint_, public_key_;
  mutable std::mutex mu_;              // the store, the node and the refusals: both threads
  uint32_t node_ = 0;
  std::optional<ckpt::SliceMacKey> mac_key_;
  ckpt::SliceStore store_{uint64_t(1) << 30};
  uint32_t refused_ = 0;
  std::string corrupt_unit_;  // SAL_TEST_CORRUPT_SLICE
  std::string corrupt_node_;  // ... "": every node
  int64_t last_report_ns_ = 0;         // the endpoint's thread's
  bool held_back_ = false;             // a report waits for the interval to end
  std::deque<wire::SliceReport> outbox_;  // under mu_: made, not yet delivered
  uv_async_t* async_ = nullptr;        // wakes the loop for them (closed by the destructor)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sal::mesh

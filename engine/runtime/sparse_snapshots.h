// sparse_snapshots.h — a worker acting on the checkpoint policy's schedule (MoEtion): after each
// committed step that takes a slot, the worker copies its share of it — the full state of the
// slot's operators and the compute weights of the later slots' (ckpt/sparse.h), of the units it
// writes (each unit by one of its holders, the writing spread: plan/unit_writers.h) — and puts it
// to the agents of its peer nodes (the plan's slice peers: plan/snapshot_peers.h), which hold it in
// their memory (mesh/slice_server.h) so that it survives this worker and its node.
//
// A GPU worker's slot is copied off the device on its copy stream (DeviceCompute::begin_snapshot,
// only the slot's units), and the snapshot thread waits for that copy instead.
//
// Nothing of it runs on the training thread: the copy and the put happen on a thread of their own
// while the next step's forward and backward run (they read the weights, as the copy does, and
// write only gradients). The trainer calls wait() before anything that writes weights or optimizer
// state (the next update, a plan's migration or restore, dropping units), which returns at once
// unless the copy is still reading (a GPU worker's slot waiting for the thread is no reason to
// wait: its copy does not read the trainer's units). Handing over the next slot waits for the
// thread to take the last one. The put encodes the slot once and hands each peer's socket the
// same frames; a peer that cannot take it (gone, its queue full) misses that slot — its window
// then never completes there, and the other replicas serve.
//
// The worker also keeps its own newest complete window and the one being filled (reported with
// every vote, job.checkpoint()). A new plan starts a new window (what the worker writes, or the
// schedule, may have changed) and keeps the last complete window of the old one until the new one
// completes, so there is no gap in coverage.
//
// With train.expert_logs the same peers get each step's upstream log (model/expert_replay.h: what
// the worker dispatched to the experts), on a log thread of its own (put_log, logs_sent).
#pragma once

#include <zmq.hpp>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ckpt/sparse.h"
#include "ckpt/writer.h"
#include "plan/schedule.h"
#include "wire/codec.h"
#include "wire/messages.h"

namespace sal::runtime {

// What a worker holds, as a vote reports it.
struct SparseHeld {
  uint64_t bytes = 0;       // every slot held (the complete window and the one being filled)
  int64_t window_from = -1; // the newest complete window's first and last iterations (-1: none)
  int64_t window_to = -1;
  double copy_ms = 0;       // the last slot's copy (on the snapshot thread)
  uint64_t slot_bytes = 0;  // ... and its bytes
  double path_cpu_ms = 0;   // the snapshot thread's CPU for its whole path: copy, checksum, encoding, MAC, sends
  uint64_t puts_missed = 0; // slots a peer could not take (gone, or its queue full)
};

// Where a worker's slots go: the writer (itself), the plan, and its peers' slice endpoints.
struct SliceRoute {
  uint32_t node = 0, index = 0;
  uint64_t plan = 0;
  std::vector<wire::SliceNode> peers;
  uint32_t log_copies = 0;  // the upstream logs go to the first this many peers (0: every one)
  std::string key_file;  // CURVE towards a peer off loopback (the agent's key pair)
  std::string mac_key;   // the job's slice key (hex): each slot put carries its MAC
};

class SparseSnapshots {
 public:
  explicit SparseSnapshots(zmq::context_t& ctx);
  ~SparseSnapshots();
  SparseSnapshots(const SparseSnapshots&) = delete;
  SparseSnapshots& operator=(const SparseSnapshots&) = delete;

  // A plan was applied: its schedule and route from now on. A route without peers (a job of one
  // node, or train.peer_copies = 0) takes no slots: nobody would hold them.
  void start(const plan::CheckpointSchedule& schedule, SliceRoute route);
  // The same plan's slots go to other peers from now on (after a patch lost some: the caller
  // switches at a window's first slot, so no window is split between peers).
  void reroute(std::vector<wire::SliceNode> peers);
  // Whether the schedule gives `step` a slot (the caller gathers the units only then).
  bool takes_slot(uint64_t step) const;
  // Whether `step`'s slot is the first of a window (what a worker writes may change only there: a
  // unit must be in every slot of the window it is restored from).
  bool starts_window(uint64_t step) const;
  // After `step`'s update: its slot, if the schedule gives it one, copied and put on the snapshot
  // thread. The units must not change until wait() returns.
  void after_commit(uint64_t step, double grad_norm, const ModelShape& shape, std::vector<const model::Unit*> units);
  // The same for a GPU worker: `copied` are the units of the slot (ckpt::slot_units), being copied
  // off the device on its copy stream; the snapshot thread waits for them, the trainer does not.
  void after_commit_copied(uint64_t step, double grad_norm, const ModelShape& shape, ckpt::SnapshotUnits copied);
  // The units of the slot `step` takes, of those `written` (none when it takes no slot).
  std::vector<UnitId> slot_units(uint64_t step, const ModelShape& shape, const std::vector<UnitId>& written) const;
  // `step`'s upstream log (model/expert_replay.h), put to the same peers on a thread of its own (a slot's copy and put, which can take longer than a step, never
  // hold it back). The trainer hands it over as soon as the backward pass is done and waits for
  // it to be sent (logs_sent()) before it votes: a node killed once the step commits has had its
  // log on the way since before the commit (a lost expert's rebuild needs every rank's log of every
  // iteration it replays). Dropped when no slots are taken.
  void put_log(uint64_t step, model::IterationLog log);
  // Returns once every log handed over is sent.
  void logs_sent();
  // Returns once no slot taken or waiting reads the trainer's units (a GPU worker's never does).
  void wait();
  SparseHeld held() const;

 private:
  struct Job {
    uint64_t step = 0;
    uint32_t index = 0;
    double grad_norm = 0;
    ModelShape shape;
    std::vector<const model::Unit*> units;
    ckpt::SnapshotUnits copied;  // a device's copy instead of `units`
    plan::CheckpointSchedule schedule;
    std::shared_ptr<const SliceRoute> route;
    uint64_t generation = 0;  // start()s so far: a slot of an older plan is put, not kept
  };
  void queue(Job job);
  void run();
  void take(const Job& job);
  struct LogJob {
    uint64_t step = 0;
    model::IterationLog log;
    plan::CheckpointSchedule schedule;
    std::shared_ptr<const SliceRoute> route;
  };
  void put(const ckpt::SparseSlot& slot, const Job& job);
  void put(const LogJob& log);
  // Each peer's socket gets the frames; returns how many peers missed them.
  using Sockets = std::vector<std::pair<std::string, std::unique_ptr<zmq::socket_t>>>;
  // To the route's first `limit` peers (0: every one); returns the puts that could not be queued.
  uint64_t send_to_peers(wire::Parts& frames, const SliceRoute& route, Sockets& sockets, size_t limit = 0);
  void run_logs();
  zmq::socket_t* socket_for(const wire::SliceNode& peer, const std::string& key_file, Sockets& sockets);

  zmq::context_t& ctx_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;      // waiting for the thread, or being copied
  std::deque<LogJob> logs_;     // waiting for the log thread
  bool log_sending_ = false;    // the log thread is putting one
  bool copying_ = false;
  bool stop_ = false;
  ckpt::SparseHolder holder_;   // under mu_
  std::shared_ptr<const SliceRoute> route_;  // under mu_
  uint64_t generation_ = 0;     // under mu_
  bool active_ = false;         // the plan gives this rank peers (none: no slots are taken at all)
  SparseHeld held_;             // copy_ms, path_cpu_ms, slot_bytes, puts_missed (under mu_)
  // The snapshot thread's own: a DEALER socket per peer endpoint.
  Sockets sockets_;
  Sockets log_sockets_;  // the log thread's own
  std::thread thread_, log_thread_;
};

}  // namespace sal::runtime

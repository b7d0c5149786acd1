// membership.h — who is in the job: nodes (one agent each) and their workers, liveness, epochs.
//
// Pure state, no sockets: the controller feeds it registrations, heartbeats, worker events and
// connection losses with the current monotonic time, and calls tick() to age silent nodes:
// alive --(one heartbeat interval late)--> suspect --(miss_limit intervals silent)--> dead.
// A heartbeat brings a suspect node back to alive; dead and left are final (a restarted agent
// registers again and gets a new id). Every change of who may take part bumps the epoch and is
// logged with its cause.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ids.h"
#include "mesh/events.h"
#include "wire/messages.h"

namespace sal::mesh {

enum class NodeState { alive, suspect, draining, dead, left };
const char* state_name(NodeState s);

struct WorkerView {
  uint32_t index = 0;
  std::string device;
  uint32_t pid = 0;
  wire::WorkerState state = wire::WorkerState::starting;
  wire::Holding held;  // what its state has seen (plan, committed steps, pending step)
  bool held_known = false;  // a heartbeat has reported `held`
  bool exited = false;
  int exit_code = 0;
  int signal = 0;
  std::string detail;  // how it exited, in words (its last error, if it said one)
};

struct Node {
  NodeId id = kNoNode;
  std::string name;
  std::string host;
  std::string addr;        // peer address of its connection
  uint32_t pid = 0;
  std::vector<std::string> devices;
  NodeState state = NodeState::alive;
  std::string cause;       // why it is suspect/dead/left
  int64_t joined_ns = 0;
  int64_t last_heartbeat_ns = 0;
  int64_t state_since_ns = 0;
  std::string routing_id;  // its ROUTER identity on the mesh socket
  int fd = -1;             // its connection's fd (ZMQ_SRCFD), for disconnect detection
  std::vector<WorkerView> workers;
  std::string slice_endpoint;  // where its agent holds sparse snapshot slices, and the key ("": local)
  std::string slice_key;

  bool live() const { return state == NodeState::alive || state == NodeState::suspect; }
  // Taking part in steps: live and not draining.
  bool usable() const { return live(); }
};

struct MembershipOptions {
  int64_t heartbeat_ms = 100;
  int64_t miss_limit = 3;
  // How often the controller calls tick(); 0: at no fixed rate. When set, a tick later than a
  // heartbeat past it means the controller did not run in between (its host stalled, its loop was
  // held): that time is not held against the nodes' silence (Membership::tick).
  int64_t tick_ms = 0;
};

// Every node silent at once (Membership::tick): waited out up to this many dead windows before
// anyone is declared dead, since the controller is more likely the one that heard nothing.
constexpr int64_t kMassSilenceWindows = 5;

// How long an agent hears nothing from its controller before it fences (agent.cpp): as long as the
// controller itself waits before declaring every node dead at once, and a heartbeat more. Sooner,
// a controller that was only starved or paused (it declares no one dead: its own silence) would
// find every plan's data plane ended by the fences and its next step failing on it.
constexpr int64_t fence_after_ms(int64_t heartbeat_ms, int64_t miss_limit) {
  return heartbeat_ms * (miss_limit * kMassSilenceWindows + 1);
}

class Membership {
 public:
  // Names the events' nodes (EventLog::name_of) for as long as it lives.
  Membership(MembershipOptions opts, EventLog& events);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  Node& join(Node info, int64_t now_ns);
  // A controller restarted from its journal: the epoch continues above `epoch`, new ids above the
  // known ones, and each known node may come back under its id (returning_id()).
  void resume(Epoch epoch, const std::map<NodeId, std::string>& known);
  // The id to give a registering agent that had `previous` (by the same name) before the restart;
  // kNoNode when it is not one the journal knows, or it came back already.
  NodeId returning_id(NodeId previous, const std::string& name) const;
  // join(), under the id the node had before the controller restarted (see returning_id()).
  Node& rejoin(Node info, NodeId id, int64_t now_ns);
  Node* find(NodeId id);
  const Node* find(NodeId id) const;
  // The node of that name (its agent's --name); of several (it registered again), the latest.
  const Node* find_by_name(const std::string& name) const;
  Node* find_by_routing(const std::string& rid);
  Node* find_by_fd(int fd);            // a live or draining node on that connection
  const Node* find_by_fd_any(int fd) const;  // any node that ever used that connection

  // Returns false when the node is unknown or no longer live (it must register again).
  bool heartbeat(NodeId id, const std::vector<wire::WorkerInfo>& workers, int64_t now_ns);
  void worker_event(NodeId id, const wire::WorkerEvent& ev, int64_t now_ns);

  void lose(NodeId id, const std::string& cause, int64_t now_ns);   // -> dead
  void leave(NodeId id, const std::string& reason, int64_t now_ns); // -> left
  void drain(NodeId id, const std::string& reason, int64_t now_ns); // -> draining

  // Ages silent nodes; returns the ids that became dead in this tick. When every node (two or
  // more) is silent at once — one past the dead window, the others at least a heartbeat late — none
  // is declared dead until the silence lasts kMassSilenceWindows dead windows (event nodes_silent):
  // the controller is more likely the one that heard nothing. When one of them is heard again,
  // those still silent are judged on their silence from then (event nodes_heard): the agents of a
  // starved host are heard again one after the other. Once the job is stopping,
  // silence kills no one: agents stopping their workers under load can miss heartbeats (seen: 309
  // ms on a loaded 2-core machine, and the workers' exits were then never recorded); the
  // controller's stop grace bounds the wait for a node that really died, and a closed connection
  // still counts as leaving. A tick that comes late (options' tick_ms) first forgives every node
  // the time the controller was not looking: seen in CI, a whole VM stalled 1.5 s and the first
  // tick after it found three healthy nodes silent past the mass-silence window; a node that really
  // froze meanwhile is still found one dead window after the controller looks again.
  std::vector<NodeId> tick(int64_t now_ns);

  // While the job stops, departures and worker exits are expected: logged as info, not warnings.
  void set_stopping() { stopping_ = true; }

  Epoch epoch() const { return epoch_; }
  const std::map<NodeId, Node>& nodes() const { return nodes_; }
  size_t count(NodeState s) const;
  // Nodes alive or suspected (not yet declared dead): the progress line's "nodes N/M alive".
  size_t live_nodes() const { return count(NodeState::alive) + count(NodeState::suspect); }
  size_t ready_workers() const;
  // Workers an agent started in the place of one that crashed (an index past its node's devices).
  size_t restarted_workers() const;
  // The ready workers of usable nodes: node id order, then worker index.
  std::vector<Participant> ready_participants() const;
  // When every worker started on a usable node has exited and one of them failed, the first
  // failure in words ("worker 0.0 exited ..."); empty otherwise (a job whose workers cannot start).
  std::string start_failure() const;
  size_t total_workers() const;

  int64_t suspect_after_ns() const;
  int64_t dead_after_ns() const;

 private:
  struct SharedSilence {
    bool shared = false;    // every node taking part (two or more) silent at once
    bool one_dead = false;  // and one of them past the dead window
  };
  SharedSilence shared_silence(int64_t now_ns) const;
  void end_shared_silence(int64_t now_ns);
  void forgive_stall(int64_t now_ns);
  Node& admit(Node info, int64_t now_ns);
  void set_state(Node& n, NodeState s, const std::string& cause, int64_t now_ns, bool bump);
  void update_worker(Node& n, const wire::WorkerInfo& w, bool reports_held);  // heartbeats report held

  MembershipOptions opts_;
  EventLog& events_;
  std::map<NodeId, Node> nodes_;
  NodeId next_id_ = 0;
  Epoch epoch_ = 0;
  std::map<NodeId, std::string> returning_;  // known to the journal, not back yet: id -> name
  bool stopping_ = false;
  bool mass_silence_said_ = false;  // the nodes_silent event of the silence under way was logged
  bool in_shared_silence_ = false;  // the last tick found every node silent at once
  int64_t last_tick_ns_ = -1;        // when tick() last ran (-1: never)
};

}  // namespace sal::mesh

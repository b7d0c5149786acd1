// membership.cpp — see membership.h.
#include "mesh/membership.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/devices.h"

namespace sal::mesh {

const char* state_name(NodeState s) {
  switch (s) {
    case NodeState::alive: return "alive";
    case NodeState::suspect: return "suspect";
    case NodeState::draining: return "draining";
    case NodeState::dead: return "dead";
    case NodeState::left: return "left";
  }
  return "?";
}

namespace {

const char* worker_state_name(wire::WorkerState s) {
  switch (s) {
    case wire::WorkerState::starting: return "starting";
    case wire::WorkerState::ready: return "ready";
    case wire::WorkerState::draining: return "draining";
    case wire::WorkerState::stopped: return "stopped";
    default: return "?";
  }
}

std::string worker_label(const Node& n, uint32_t index) {
  return "worker " + std::to_string(n.id) + "." + std::to_string(index);
}

// The device of a node's worker: a worker started in place of a crashed one has the next index of
// its device slot (core/devices.h: device_slot).
std::string device_of(const Node& n, uint32_t index) {
  return n.devices.empty() ? "" : n.devices[device_slot(index, n.devices.size())];
}

// Nodes still taking part: alive, suspect or draining (their silence is judged, their connection
// and workers count).
bool taking_part_in_liveness(const Node& n) { return n.live() || n.state == NodeState::draining; }

}  // namespace

Membership::Membership(MembershipOptions opts, EventLog& events) : opts_(opts), events_(events) {
  events_.name_of = [this](NodeId id) {
    const Node* n = find(id);
    return n ? n->name : std::string();
  };
}

Membership::~Membership() { events_.name_of = nullptr; }

const Node* Membership::find_by_name(const std::string& name) const {
  const Node* newest = nullptr;  // a name that registered again: its latest node
  for (const auto& [id, n] : nodes_)
    if (n.name == name && (!newest || n.joined_ns >= newest->joined_ns)) newest = &n;
  return newest;
}

int64_t Membership::suspect_after_ns() const {
  // One interval late (with half an interval of slack for scheduling jitter).
  return opts_.heartbeat_ms * 3 / 2 * 1'000'000;
}
int64_t Membership::dead_after_ns() const { return opts_.heartbeat_ms * opts_.miss_limit * 1'000'000; }


void Membership::resume(Epoch epoch, const std::map<NodeId, std::string>& known) {
  epoch_ = std::max(epoch_, epoch);
  returning_ = known;
  for (const auto& [id, name] : known) next_id_ = std::max(next_id_, id + 1);
}

NodeId Membership::returning_id(NodeId previous, const std::string& name) const {
  auto it = returning_.find(previous);
  return it != returning_.end() && it->second == name && !nodes_.count(previous) ? previous : kNoNode;
}

Node& Membership::rejoin(Node info, NodeId id, int64_t now_ns) {
  returning_.erase(id);
  info.id = id;
  return admit(std::move(info), now_ns);
}

Node& Membership::join(Node info, int64_t now_ns) {
  info.id = next_id_++;
  return admit(std::move(info), now_ns);
}

Node& Membership::admit(Node info, int64_t now_ns) {
  info.state = NodeState::alive;
  info.joined_ns = info.last_heartbeat_ns = info.state_since_ns = now_ns;
  auto [it, _] = nodes_.emplace(info.id, std::move(info));
  Node& n = it->second;
  ++epoch_;
  events_.add("node_joined", n.id, epoch_,
              n.name + " from " + (n.addr.empty() ? n.host : n.addr) + " with " +
                  std::to_string(n.devices.size()) + " device(s)");
  spdlog::info("node {} ({}) joined from {} (epoch {})", n.id, n.name, n.addr, epoch_);
  return n;
}

Node* Membership::find(NodeId id) {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}
const Node* Membership::find(NodeId id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

Node* Membership::find_by_routing(const std::string& rid) {
  for (auto& [id, n] : nodes_)
    if (n.routing_id == rid && n.live()) return &n;
  for (auto& [id, n] : nodes_)
    if (n.routing_id == rid && n.state == NodeState::draining) return &n;
  return nullptr;
}

Node* Membership::find_by_fd(int fd) {
  for (auto& [id, n] : nodes_)
    if (n.fd == fd && taking_part_in_liveness(n)) return &n;
  return nullptr;
}

const Node* Membership::find_by_fd_any(int fd) const {
  for (auto& [id, n] : nodes_)
    if (n.fd == fd) return &n;
  return nullptr;
}

void Membership::set_state(Node& n, NodeState s, const std::string& cause, int64_t now_ns,
                           bool bump_epoch) {
  if (n.state == s) return;
  n.state = s;
  n.cause = cause;
  n.state_since_ns = now_ns;
  if (bump_epoch) ++epoch_;
  events_.add(std::string("node_") + state_name(s), n.id, epoch_, cause);
  if (s == NodeState::dead) {
    spdlog::warn("node {} ({}) is dead: {}", n.id, n.name, cause);
  } else {
    spdlog::info("node {} ({}) is {}: {}", n.id, n.name, state_name(s), cause);
  }
}

void Membership::update_worker(Node& n, const wire::WorkerInfo& w, bool reports_held) {
  for (auto& v : n.workers) {
    if (v.index != w.index) continue;
    if (v.exited) return;  // an exit is final; a late heartbeat must not resurrect it
    if (reports_held) v.held = w.held, v.held_known = true;
    if (v.state != w.state) {
      bool ready_change = (v.state == wire::WorkerState::ready) != (w.state == wire::WorkerState::ready);
      v.state = w.state;
      v.pid = w.pid;
      if (!w.device.empty()) v.device = w.device;
      if (ready_change) ++epoch_;
      events_.add("worker_" + std::string(worker_state_name(w.state)), n.id, epoch_,
                  worker_label(n, w.index) + " on " + v.device);
    }
    return;
  }
  std::string device = !w.device.empty() ? w.device : device_of(n, w.index);
  n.workers.push_back({w.index, device, w.pid, wire::WorkerState::starting});
  update_worker(n, w, reports_held);
}

bool Membership::heartbeat(NodeId id, const std::vector<wire::WorkerInfo>& workers,
                           int64_t now_ns) {
  Node* n = find(id);
  if (!n || !(n->live() || n->state == NodeState::draining)) return false;
  n->last_heartbeat_ns = now_ns;
  if (n->state == NodeState::suspect) set_state(*n, NodeState::alive, "heartbeat resumed", now_ns, false);
  for (const auto& w : workers) update_worker(*n, w, true);
  return true;
}

void Membership::worker_event(NodeId id, const wire::WorkerEvent& ev, int64_t now_ns) {
  Node* n = find(id);
  if (!n) return;
  (void)now_ns;
  using K = wire::WorkerEventKind;
  if (ev.kind == K::exited || ev.kind == K::spawn_failed) {
    WorkerView* v = nullptr;
    for (auto& w : n->workers)
      if (w.index == ev.index) v = &w;
    if (!v) {
      n->workers.push_back({ev.index, device_of(*n, ev.index), ev.pid});
      v = &n->workers.back();
    }
    if (v->exited) return;
    bool was_ready = v->state == wire::WorkerState::ready;
    v->exited = true;
    v->exit_code = ev.exit_code;
    v->signal = ev.signal;
    v->state = wire::WorkerState::stopped;
    std::string how = ev.kind == K::spawn_failed ? "failed to start: " + ev.detail
                      : ev.signal       ? "killed by signal " + std::to_string(ev.signal)
                                        : "exited with code " + std::to_string(ev.exit_code);
    if (ev.kind == K::exited && !ev.detail.empty()) how += " (" + ev.detail + ")";
    v->detail = how;
    if (was_ready) ++epoch_;
    events_.add("worker_exited", n->id, epoch_, worker_label(*n, ev.index) + " " + how);
    bool expected = stopping_ || n->state == NodeState::draining;
    spdlog::log(expected ? spdlog::level::info : spdlog::level::warn, "{} {}", worker_label(*n, ev.index), how);
    return;
  }
  wire::WorkerState st = ev.kind == K::ready ? wire::WorkerState::ready : wire::WorkerState::starting;
  std::string device = device_of(*n, ev.index);
  for (auto& w : n->workers)
    if (w.index == ev.index) device = w.device;
  if (ev.kind == K::restarted)
    events_.add("worker_restarted", n->id, epoch_, worker_label(*n, ev.index) + " on " + device + " " + ev.detail);
  update_worker(*n, {ev.index, device, ev.pid, st, {}}, false);  // an event says nothing of what it holds
}

void Membership::lose(NodeId id, const std::string& cause, int64_t now_ns) {
  Node* n = find(id);
  if (!n || n->state == NodeState::dead || n->state == NodeState::left) return;
  set_state(*n, NodeState::dead, cause, now_ns, true);
}

void Membership::leave(NodeId id, const std::string& reason, int64_t now_ns) {
  Node* n = find(id);
  if (!n || n->state == NodeState::dead || n->state == NodeState::left) return;
  set_state(*n, NodeState::left, reason, now_ns, n->state != NodeState::draining);
}

void Membership::drain(NodeId id, const std::string& reason, int64_t now_ns) {
  Node* n = find(id);
  if (!n || !n->live()) return;
  set_state(*n, NodeState::draining, reason, now_ns, true);
}

// Whether every node still taking part (two or more) is silent at once — each at least a heartbeat
// late (past the suspect window: their last heartbeats were sent up to an interval apart, so when
// the controller hears nothing from anyone they cross the dead window one after the other), none
// past kMassSilenceWindows dead windows — and whether one of them is past the dead window. More
// likely the controller heard nothing (its host starved, its own link cut), or the whole host was
// starved, than that all of them died at the same moment: a node that really dies closes its
// connection, and that is seen at once. Such silence waits longer before anyone is declared dead.
Membership::SharedSilence Membership::shared_silence(int64_t now_ns) const {
  size_t taking_part = 0;
  SharedSilence s;
  for (const auto& [id, n] : nodes_) {
    if (!taking_part_in_liveness(n)) continue;
    ++taking_part;
    const int64_t silent = now_ns - n.last_heartbeat_ns;
    if (silent < suspect_after_ns() || silent >= kMassSilenceWindows * dead_after_ns()) return {};
    s.one_dead = s.one_dead || silent >= dead_after_ns();
  }
  s.shared = taking_part >= 2;
  s.one_dead = s.shared && s.one_dead;
  return s;
}

// A silence every node shared is over once one of them is heard again. Those still silent are
// judged on their silence from then: under a starved host the agents are heard again one after the
// other, over a few hundred milliseconds (seen in CI: four healthy nodes silent together at a plan
// switch; as the others were heard again, one not yet heard was declared dead at once, 515 ms silent).
// A node that really froze meanwhile is found one dead window after the first was heard; one that
// died closed its connection and was seen at once.
void Membership::end_shared_silence(int64_t now_ns) {
  std::vector<Node*> still;
  bool heard = false;
  for (auto& [id, n] : nodes_) {
    if (!taking_part_in_liveness(n)) continue;
    if (now_ns - n.last_heartbeat_ns < suspect_after_ns())
      heard = true;
    else
      still.push_back(&n);
  }
  if (!heard || still.empty()) return;
  std::string names;
  for (Node* n : still) {
    names += (names.empty() ? "" : ", ") + std::to_string(n->id);
    n->last_heartbeat_ns = std::max(n->last_heartbeat_ns, now_ns);
  }
  events_.add("nodes_heard", kNoNode, epoch_,
              "nodes heard again after a silence all of them shared; node(s) " + names +
                  " still silent: judged on their silence from now (one dead window, " +
                  std::to_string(dead_after_ns() / 1'000'000) + " ms)");
}

// The controller did not look between its last tick and this one when the gap is a heartbeat past
// its tick period: the heartbeats it would have heard were not sent (the host stalled) or are
// counted already (the controller drains its socket before it ticks). The whole gap is taken off
// every node's silence, so a node is judged on the time the controller was listening.
void Membership::forgive_stall(int64_t now_ns) {
  const int64_t gap = last_tick_ns_ < 0 ? 0 : now_ns - last_tick_ns_;
  last_tick_ns_ = now_ns;
  if (opts_.tick_ms <= 0 || gap < (opts_.tick_ms + opts_.heartbeat_ms) * 1'000'000) return;
  events_.add("controller_stalled", kNoNode, epoch_,
              "the liveness check ran " + std::to_string(gap / 1'000'000) +
                  " ms after the one before (the controller's host stalled?): that time is not counted "
                  "as the nodes' silence");
  for (auto& [id, n] : nodes_) n.last_heartbeat_ns = std::min(now_ns, n.last_heartbeat_ns + gap);
}

std::vector<NodeId> Membership::tick(int64_t now_ns) {
  std::vector<NodeId> died;
  forgive_stall(now_ns);
  if (stopping_) return died;
  const SharedSilence silence = shared_silence(now_ns);
  if (in_shared_silence_ && !silence.shared) end_shared_silence(now_ns);
  in_shared_silence_ = silence.shared;
  if (silence.one_dead && !mass_silence_said_)
    events_.add("nodes_silent", kNoNode, epoch_,
                "no node heard for " + std::to_string(dead_after_ns() / 1'000'000) +
                    " ms or more, all at once: the controller may be the one cut off or starved; waiting up to " +
                    std::to_string(kMassSilenceWindows * dead_after_ns() / 1'000'000) + " ms before declaring them dead");
  mass_silence_said_ = silence.one_dead;
  for (auto& [id, n] : nodes_) {
    if (!taking_part_in_liveness(n)) continue;
    int64_t silent = now_ns - n.last_heartbeat_ns;
    if (silent >= dead_after_ns() && !silence.shared) {
      set_state(n, NodeState::dead,
                "silent for " + std::to_string(silent / 1'000'000) + " ms (" +
                    std::to_string(opts_.miss_limit) + " heartbeats of " +
                    std::to_string(opts_.heartbeat_ms) + " ms missed)",
                now_ns, true);
      died.push_back(id);
    } else if (silent >= suspect_after_ns() && n.state == NodeState::alive) {
      set_state(n, NodeState::suspect,
                "no heartbeat for " + std::to_string(silent / 1'000'000) + " ms", now_ns, false);
    }
  }
  return died;
}

size_t Membership::count(NodeState s) const {
  size_t c = 0;
  for (auto& [id, n] : nodes_) c += n.state == s;
  return c;
}

size_t Membership::restarted_workers() const {
  size_t c = 0;
  for (auto& [id, n] : nodes_)
    for (const auto& w : n.workers) c += restarted_worker(w.index, n.devices.size());
  return c;
}

size_t Membership::ready_workers() const {
  size_t c = 0;
  for (auto& [id, n] : nodes_)
    if (n.usable())
      for (auto& w : n.workers) c += !w.exited && w.state == wire::WorkerState::ready;
  return c;
}

std::vector<Participant> Membership::ready_participants() const {
  std::vector<Participant> out;
  for (const auto& [id, n] : nodes_) {
    if (!n.usable()) continue;
    for (const auto& w : n.workers)
      if (!w.exited && w.state == wire::WorkerState::ready) out.push_back({id, w.index});
  }
  return out;
}

std::string Membership::start_failure() const {
  std::string first;
  size_t workers = 0;
  for (const auto& [id, n] : nodes_) {
    if (!n.usable()) continue;
    for (const auto& w : n.workers) {
      ++workers;
      if (!w.exited) return "";
      if ((w.exit_code != 0 || w.signal != 0) && first.empty())
        first = "worker " + std::to_string(id) + "." + std::to_string(w.index) + " " + w.detail;
    }
  }
  return workers > 0 ? first : "";
}

size_t Membership::total_workers() const {
  size_t c = 0;
  for (auto& [id, n] : nodes_)
    if (taking_part_in_liveness(n))
      for (auto& w : n.workers) c += !w.exited;
  return c;
}

}  // namespace sal::mesh

// netns_lab.h — a network of namespaces on one machine, in which a link can be cut: what a drill's
// partition{} needs, and the partition tests. A hub holds a bridge with the controller's address
// (10.78.0.1); each node gets a named namespace of its own (`ip netns add`), joined to the bridge by
// a veth pair, with an address in 10.78.0.0/24 — addresses that exist only inside namespaces the lab
// made, so nothing of it reaches or disturbs the machine's own network. The hub is a named namespace
// the lab makes too (`salamander run`: its controller runs in it), or the namespace of the calling
// process when that is a private one already (the tests' netns_main.cpp). cut(k) takes node k's link
// down (`ip link set … down`): packets are dropped, not refused, as in a real partition; heal(k)
// brings it back. The destructor deletes every namespace the lab made (their veths go with them);
// namespaces left by a lab whose process was killed are deleted by the next lab. Needs root and
// iproute2's `ip`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::drill {

class NetLab {
 public:
  enum class Hub { named, this_namespace };

  // The hub and `nodes` node namespaces; an error says why this machine does not allow them (and
  // leaves nothing behind).
  static Result<std::unique_ptr<NetLab>> create(int nodes, Hub hub = Hub::named);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  int nodes() const { return nodes_; }
  std::string controller_address() const { return "10.78.0.1"; }
  std::string address(int node) const { return "10.78.0." + std::to_string(10 + node); }
  std::string netns(int node) const;
  // The hub's namespace name ("" for Hub::this_namespace).
  std::string hub_netns() const;
  // `command` run inside node's namespace (node -1: the hub's): ip netns exec NAME command...
  // (command[0] an absolute path).
  std::vector<std::string> inside(int node, const std::vector<std::string>& command) const;
  // One more node namespace; its index.
  Result<int> add_node();
  Status cut(int node);
  Status heal(int node);

 private:
  NetLab(int nodes, Hub hub) : nodes_(nodes), hub_(hub) {}
  Status make_hub();
  Status make_node(int node);
  // `ip ARGS...` in the hub's namespace.
  Status in_hub(const std::string& args) const;
  void remove_all();

  int nodes_ = 0;
  Hub hub_;
  std::vector<std::string> made_;  // the namespaces made so far, for the destructor
  bool bridge_made_ = false;
};

// The path of the `ip` program ("" if none of the usual places has it).
std::string ip_program();

}  // namespace sal::drill

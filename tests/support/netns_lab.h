// netns_lab.h — a small network of namespaces for partition tests. The test process's own network
// namespace (netns_main.cpp made it) holds a bridge with the controller's address; each node gets a
// named namespace of its own (`ip netns add`), joined to the bridge by a veth pair, with an address
// in 10.78.0.0/24 — addresses that exist only inside the namespaces the lab made. cut(k) takes a
// node's link down (`ip link set … down`): packets are dropped, not refused, as in a real partition;
// heal(k) brings it back. The destructor deletes every namespace it made, whatever happened (their
// veths go with them, the bridge with the test's namespace); namespaces left by a lab whose process
// was killed are deleted by the next lab.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace sal::test {

// Thrown where this machine does not allow named namespaces or veth pairs; what() says why.
struct LabUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class NetnsLab {
 public:
  explicit NetnsLab(int nodes);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  int nodes() const { return nodes_; }
  std::string controller_address() const { return "10.78.0.1"; }
  std::string address(int node) const { return "10.78.0." + std::to_string(10 + node); }
  std::string netns(int node) const;
  // `command` run inside node's namespace: ip netns exec NAME command... (args[0] an absolute path).
  std::vector<std::string> inside(int node, const std::vector<std::string>& command) const;
  void cut(int node);
  void heal(int node);

 private:
  void make_node(int node);
  void remove_all();

  int nodes_ = 0;
  std::vector<std::string> made_;  // the namespaces made so far, for the destructor
};

// The path of the `ip` program ("" if none of the usual places has it).
std::string ip_program();

}  // namespace sal::test

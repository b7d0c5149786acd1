// netns_lab.cpp — see netns_lab.h. The `ip` commands run through the shell with names the lab
// made itself (no outside text reaches a command line).
#include "drill/netns_lab.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <regex>

namespace sal::drill {
namespace {

constexpr const char* kLabPrefix = "sal-lab-";
constexpr const char* kLabBridge = "salbr0";

// Runs a shell command; its exit status, and what it printed (stdout and stderr).
std::pair<int, std::string> lab_shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p), out};
}

Status lab_run(const std::string& command) {
  auto [rc, out] = lab_shell(command);
  if (rc != 0) return fail("`", command, "` failed: ", out.empty() ? "exit status " + std::to_string(rc) : out);
  return {};
}

std::string host_veth(int node) { return "salv" + std::to_string(node); }

bool lab_pid_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Namespaces of labs whose process is gone (killed before its destructor ran).
void remove_stale() {
  std::error_code ec;
  std::regex name(std::string(kLabPrefix) + "(\\d+)-\\w+");
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    std::smatch m;
    std::string n = e.path().filename();
    if (std::regex_match(n, m, name) && !lab_pid_alive(pid_t(std::stol(m[1])))) lab_shell(ip_program() + " netns del " + n);
  }
}

}  // namespace

std::string ip_program() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

Result<std::unique_ptr<NetLab>> NetLab::create(int nodes, Hub hub) {
  if (ip_program().empty()) return fail("no `ip` program (install iproute2)");
  if (::geteuid() != 0) return fail("network namespaces need root (this process runs as uid ", ::geteuid(), ")");
  remove_stale();
  std::unique_ptr<NetLab> lab(new NetLab(nodes, hub));
  Status s = lab->make_hub();
  for (int k = 0; s && k < nodes; ++k) s = lab->make_node(k);
  if (!s) return s.error().with_context("network namespaces");  // the destructor removes what was made
  return lab;
}

NetLab::~NetLab() { remove_all(); }

std::string NetLab::netns(int node) const {
  return kLabPrefix + std::to_string(::getpid()) + "-" + std::to_string(node);
}

std::string NetLab::hub_netns() const {
  return hub_ == Hub::named ? kLabPrefix + std::to_string(::getpid()) + "-hub" : "";
}

Status NetLab::in_hub(const std::string& args) const {
  std::string ns = hub_netns();
  return lab_run(ip_program() + (ns.empty() ? " " : " -n " + ns + " ") + args);
}

// The bridge, with the controller's address, and loopback up (a named hub is a fresh namespace).
Status NetLab::make_hub() {
  if (hub_ == Hub::named) {
    SAL_TRY(lab_run(ip_program() + " netns add " + hub_netns()));
    made_.push_back(hub_netns());
    SAL_TRY(in_hub("link set lo up"));
  }
  SAL_TRY(in_hub(std::string("link add ") + kLabBridge + " type bridge"));
  bridge_made_ = true;
  SAL_TRY(in_hub("addr add " + controller_address() + "/24 dev " + kLabBridge));
  return in_hub(std::string("link set ") + kLabBridge + " up");
}

// A namespace with loopback up and one end of a veth pair (eth0, with the node's address); the
// other end on the hub's bridge.
Status NetLab::make_node(int node) {
  std::string ip = ip_program(), ns = netns(node), veth = host_veth(node);
  SAL_TRY(lab_run(ip + " netns add " + ns));
  made_.push_back(ns);
  SAL_TRY(in_hub("link add " + veth + " type veth peer name eth0 netns " + ns));
  SAL_TRY(in_hub("link set " + veth + " master " + kLabBridge));
  SAL_TRY(in_hub("link set " + veth + " up"));
  std::string in = ip + " -n " + ns + " ";
  return lab_run(in + "link set lo up && " + in + "addr add " + address(node) + "/24 dev eth0 && " + in + "link set eth0 up");
}

Result<int> NetLab::add_node() {
  int k = nodes_;
  if (10 + k > 254) return fail("network namespaces: no address left for node ", k);
  SAL_TRY(make_node(k));
  ++nodes_;
  return k;
}

void NetLab::remove_all() {
  // the node namespaces first: their veths go with them; a named hub takes the bridge with it
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) lab_shell(ip_program() + " netns del " + *it);
  made_.clear();
  if (bridge_made_ && hub_ == Hub::this_namespace) lab_shell(ip_program() + " link del " + kLabBridge);
  bridge_made_ = false;
}

std::vector<std::string> NetLab::inside(int node, const std::vector<std::string>& command) const {
  std::string ns = node < 0 ? hub_netns() : netns(node);
  if (ns.empty()) return command;
  std::vector<std::string> argv{ip_program(), "netns", "exec", ns};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

Status NetLab::cut(int node) { return in_hub("link set " + host_veth(node) + " down"); }
Status NetLab::heal(int node) { return in_hub("link set " + host_veth(node) + " up"); }

}  // namespace sal::drill

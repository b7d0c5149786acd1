// netns_lab.cpp — see netns_lab.h.
#include "support/netns_lab.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>

#include "support/proc.h"

namespace sal::test {
namespace {

constexpr const char* kPrefix = "sal-lab-";
constexpr const char* kBridge = "salbr0";

// Runs a shell command; its status, and what it printed (stdout and stderr).
std::pair<int, std::string> sh(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p), out};
}

void run(const std::string& command) {
  auto [rc, out] = sh(command);
  if (rc != 0) throw std::runtime_error("`" + command + "` failed: " + out);
}

std::string host_veth(int node) { return "salv" + std::to_string(node); }

// Namespaces of labs whose process is gone (killed before its destructor ran).
void remove_stale() {
  std::error_code ec;
  std::regex name(std::string(kPrefix) + "(\\d+)-\\d+");
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    std::smatch m;
    std::string n = e.path().filename();
    if (std::regex_match(n, m, name) && !pid_alive(pid_t(std::stol(m[1])))) sh(ip_program() + " netns del " + n);
  }
}

}  // namespace

std::string ip_program() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

NetnsLab::NetnsLab(int nodes) : nodes_(nodes) {
  std::string ip = ip_program();
  if (ip.empty()) throw LabUnavailable("no `ip` program (iproute2)");
  remove_stale();
  auto [rc, out] = sh(ip + " link add " + kBridge + " type bridge");
  if (rc != 0) throw LabUnavailable("cannot make a bridge: " + out);
  try {
    run(ip + " addr add " + controller_address() + "/24 dev " + kBridge + " && " + ip + " link set " + kBridge + " up");
    for (int k = 0; k < nodes; ++k) make_node(k);
  } catch (const std::exception& e) {
    remove_all();
    throw LabUnavailable(e.what());
  }
}

NetnsLab::~NetnsLab() { remove_all(); }

std::string NetnsLab::netns(int node) const {
  return kPrefix + std::to_string(::getpid()) + "-" + std::to_string(node);
}

// A namespace with loopback up and one end of a veth pair (eth0, with the node's address); the
// other end on the bridge.
void NetnsLab::make_node(int node) {
  std::string ip = ip_program(), ns = netns(node), veth = host_veth(node);
  run(ip + " netns add " + ns);
  made_.push_back(ns);
  run(ip + " link add " + veth + " type veth peer name eth0 netns " + ns);
  run(ip + " link set " + veth + " master " + kBridge + " && " + ip + " link set " + veth + " up");
  std::string in = ip + " -n " + ns + " ";
  run(in + "link set lo up && " + in + "addr add " + address(node) + "/24 dev eth0 && " + in + "link set eth0 up");
}

void NetnsLab::remove_all() {
  for (const auto& ns : made_) sh(ip_program() + " netns del " + ns);
  made_.clear();
  sh(ip_program() + " link del " + kBridge);
}

std::vector<std::string> NetnsLab::inside(int node, const std::vector<std::string>& command) const {
  std::vector<std::string> argv{ip_program(), "netns", "exec", netns(node)};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

void NetnsLab::cut(int node) { run(ip_program() + " link set " + host_veth(node) + " down"); }
void NetnsLab::heal(int node) { run(ip_program() + " link set " + host_veth(node) + " up"); }

}  // namespace sal::test

// security.cpp — see security.h.
#include "core/lifetime.h"
#include "mesh/security.h"

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sal::mesh {
Result<Allowlist> Allowlist::load(const std::string& path) {
  auto text = read_file(path, 1 << 20);
  if (!text) return Error("allowlist " + text.error().message());
  return parse(*text, path);
}

Result<Allowlist> Allowlist::parse(const std::string& text, const std::string& path) {
  Allowlist a;
  for (auto& [line_no, line] : content_lines(text)) {
    std::vector<std::string> parts = words(line);
    if (parts.size() != 3)
      return fail(path, ":", line_no, ": expected '<public key> <role> <name>'");
    if (!wire::valid_z85_key(parts[0])) return fail(path, ":", line_no, ": not a 40-character Z85 public key");
    if (parts[1] != "node" && !parse_role(parts[1]))
      return fail(path, ":", line_no, ": unknown role '", parts[1],
                  "' (expected node, observe, operate or admin)");
    if (a.find_name(parts[2])) return fail(path, ":", line_no, ": name '", parts[2], "' listed twice");
    a.entries_.push_back({parts[0], parts[1], parts[2]});
  }
  return a;
}

const AllowEntry* Allowlist::find_key(const std::string& z85) const {
  for (const auto& e : entries_)
    if (e.public_key == z85) return &e;
  return nullptr;
}

std::vector<std::string> Allowlist::node_keys() const {
  std::vector<std::string> out;
  for (const auto& e : entries_)
    if (e.role == "node") out.push_back(e.public_key);
  return out;
}

Allowlist Allowlist::of_nodes(const std::vector<std::string>& keys) {
  Allowlist a;
  for (size_t i = 0; i < keys.size(); ++i)
    if (wire::valid_z85_key(keys[i])) a.entries_.push_back({keys[i], "node", "node-key-" + std::to_string(i + 1)});
  return a;
}

const AllowEntry* Allowlist::find_name(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

ZapHandler::ZapHandler(zmq::context_t& ctx, Allowlist allow)
    : ctx_(ctx), allow_(std::move(allow)) {
  // Bind on this thread so the handler exists before any server socket accepts a handshake.
  auto* sock = new zmq::socket_t(ctx_, zmq::socket_type::rep);
  sock->set(zmq::sockopt::linger, 0);
  sock->bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this, sock] {
    std::unique_ptr<zmq::socket_t> owned(sock);
    block_signals_in_this_thread();
    KindLog refusals;  // a flood of bad keys is a line per domain and kind, not per handshake
    while (!stop_) {
      zmq::pollitem_t item{sock->handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
      std::vector<zmq::message_t> req;
      if (!zmq::recv_multipart(*sock, std::back_inserter(req), zmq::recv_flags::dontwait)) continue;
      auto text = [&](size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
      std::string domain = text(2), address = text(3), mechanism = text(5);
      std::string key = req.size() >= 7 ? req[6].to_string() : std::string();
      ZapVerdict v;
      {
        std::lock_guard lock(mu_);
        v = zap_verdict(allow_, domain, mechanism, key);
      }
      if (v.admitted) {
        spdlog::info("auth: admitted '{}' from {} on {}", v.user, address, domain);
      } else {
        uint64_t suppressed = 0;
        if (refusals.allow(domain + ": " + v.kind, mono_ns(), suppressed))
          spdlog::warn("auth: refused {} from {} on {}: {}{}", v.key, address, domain, v.reason,
                       KindLog::more(suppressed));
      }
      std::string status = v.admitted ? "200" : "400", reason = v.reason, user = v.user;
      std::vector<zmq::message_t> rep;
      rep.emplace_back(std::string("1.0"));
      rep.emplace_back(text(1));
      rep.emplace_back(status);
      rep.emplace_back(reason);
      rep.emplace_back(user);
      rep.emplace_back();
      zmq::send_multipart(*sock, rep);
    }
  });
}

void ZapHandler::set_allowlist(Allowlist allow) {
  std::lock_guard lock(mu_);
  allow_ = std::move(allow);
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

ZapVerdict zap_verdict(const Allowlist& allow, const std::string& domain, const std::string& mechanism,
                       const std::string& key) {
  ZapVerdict v;
  if (mechanism != "CURVE" || key.size() != 32) {
    v.kind = v.reason = "CURVE required";
    return v;
  }
  char z85[41] = {0};
  zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(key.data()), 32);
  v.key = z85;
  const AllowEntry* e = allow.find_key(v.key);
  if (!e) {
    v.kind = v.reason = "key not in allowlist";
  } else if (!domain_admits(domain, e->role)) {
    v.kind = "role not allowed";
    v.reason = "key '" + e->name + "' (role " + e->role + ") not allowed on domain " + domain;
  } else {
    v.admitted = true;
    v.reason = "OK";
    v.user = e->name;
  }
  return v;
}

bool domain_admits(const std::string& domain, const std::string& role) {
  if (domain == kMeshDomain || domain == kStoreDomain || domain == kSliceDomain) return role == "node";
  if (domain == kReplDomain) return role != "node";
  return false;
}

wire::SocketHook store_server_hook(const std::string& endpoint, const KeyPair* server_key) {
  return wire::curve_server_hook(endpoint, server_key, kStoreDomain);
}

std::string user_id(zmq::message_t& msg) {
  const char* u = zmq_msg_gets(msg.handle(), "User-Id");
  return u ? u : "";
}

std::optional<Role> session_role(const std::string& user, const Allowlist* allow) {
  if (!allow) return Role::admin;  // a local endpoint: whoever can reach it owns the machine
  if (user.empty()) return std::nullopt;
  const AllowEntry* e = allow->find_name(user);
  if (!e) return std::nullopt;
  return parse_role(e->role);
}

}  // namespace sal::mesh

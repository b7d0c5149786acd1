// security.cpp — see security.h.
#include "core/lifetime.h"
#include "mesh/security.h"

#include <spdlog/spdlog.h>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::mesh {
Result<Allowlist> Allowlist::load(const std::string& path) {
  auto text = read_file(path, 1 << 20);
  if (!text) return Error("allowlist " + text.error().message());
  Allowlist a;
  for (auto& [line_no, line] : content_lines(*text)) {
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
    while (!stop_) {
      zmq::pollitem_t item{sock->handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
      std::vector<zmq::message_t> req;
      if (!zmq::recv_multipart(*sock, std::back_inserter(req), zmq::recv_flags::dontwait)) continue;
      auto text = [&](size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
      std::string domain = text(2), address = text(3), mechanism = text(5);
      std::string status = "400", reason = "denied", user;
      if (mechanism != "CURVE" || req.size() < 7 || req[6].size() != 32) {
        reason = "CURVE required";
      } else {
        char z85[41] = {0};
        zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
        const AllowEntry* e = allow_.find_key(z85);
        bool node_role = e && e->role == "node";
        if (!e) {
          reason = "key not in allowlist";
        } else if (domain == kMeshDomain ? !node_role : domain == kReplDomain ? node_role : true) {
          reason = "key '" + e->name + "' (role " + e->role + ") not allowed on domain " + domain;
        } else {
          status = "200";
          reason = "OK";
          user = e->name;
        }
        if (status != "200")
          spdlog::warn("auth: refused {} from {} on {}: {}", z85, address, domain, reason);
        else
          spdlog::info("auth: admitted '{}' from {} on {}", user, address, domain);
      }
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

ZapHandler::~ZapHandler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
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

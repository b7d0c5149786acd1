// endpoint.cpp — see endpoint.h.
#include "metrics/endpoint.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/exposer.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "comm/tls_front.h"
#include "core/http_bind.h"
#include "mesh/endpoint.h"
#include "wire/curve.h"

namespace sal::metrics {

// civetweb's threads answering scrapes: a Prometheus pair scraping at once is served together, a
// third waits its turn.
constexpr const char* kServerThreads = "2";
// A client that opens a connection and sends no request holds a thread this long at most.
constexpr const char* kRequestTimeoutMs = "5000";
// How often a stopping endpoint is knocked on (knock_until).
constexpr std::chrono::milliseconds kKnockEvery{2};

namespace {

// The credentials of the authenticated endpoints this process serves, by the port each listens
// on: civetweb's request callback gets the connection and no pointer of ours, and the connection's
// server port names the endpoint. A request on a port with no entry (yet) is refused.
class CredentialTable {
 public:
  void set(int port, std::shared_ptr<const HttpCredentials> c) {
    std::lock_guard lock(mu_);
    by_port_[port] = std::move(c);
  }
  void erase(int port) {
    std::lock_guard lock(mu_);
    by_port_.erase(port);
  }
  std::shared_ptr<const HttpCredentials> find(int port) {
    std::lock_guard lock(mu_);
    auto it = by_port_.find(port);
    return it == by_port_.end() ? nullptr : it->second;
  }

 private:
  std::mutex mu_;
  std::map<int, std::shared_ptr<const HttpCredentials>> by_port_;
};

CredentialTable& credential_table() {
  static CredentialTable t;
  return t;
}

// civetweb's begin_request: a request without the credentials gets 401 and goes no further.
int check_credentials(mg_connection* conn) {
  auto creds = credential_table().find(mg_get_request_info(conn)->server_port);
  if (creds && http_authorized(*creds, mg_get_header(conn, "Authorization"))) return 0;
  const char* scheme = creds && creds->token.empty() ? "Basic" : "Bearer";
  mg_printf(conn,
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: %s realm=\"salamander\"\r\nContent-Type: text/plain\r\n"
            "Content-Length: 13\r\nConnection: close\r\n\r\nunauthorized\n",
            scheme);
  return 401;
}

using AddrInfo = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

// `host` (brackets around an IPv6 address taken off) and `port` as a TCP socket address.
Result<AddrInfo> resolve(std::string host, uint16_t port, int flags) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return fail("the host is not an address here (", gai_strerror(rc), ")");
  return AddrInfo(found, &freeaddrinfo);
}

// Why `b` cannot be listened on, as bind(2) says it: civetweb only reports that it failed.
std::string why_not_listening(const HttpBind& b) {
  auto a = resolve(b.host, b.port, AI_PASSIVE);
  if (!a) return a.error().message();
  std::string why = "the HTTP server did not start";
  int fd = socket((*a)->ai_family, (*a)->ai_socktype, (*a)->ai_protocol);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (*a)->ai_addr, (*a)->ai_addrlen) != 0) why = std::strerror(errno);
    close(fd);
  }
  return why;
}

// Connects to `b` and hangs up every few ms until `done`: civetweb's accepting thread notices a
// stop only between waits of up to 2 s for a connection, so without one a stop takes that long.
void knock_until(const HttpBind& b, const std::atomic<bool>& done) {
  auto a = resolve(b.host == "0.0.0.0" ? "127.0.0.1" : b.host, b.port, 0);
  if (!a) return;
  while (!done) {
    int fd = socket((*a)->ai_family, (*a)->ai_socktype, (*a)->ai_protocol);
    if (fd >= 0) {
      (void)connect(fd, (*a)->ai_addr, (*a)->ai_addrlen);
      close(fd);
    }
    std::this_thread::sleep_for(kKnockEvery);
  }
}

}  // namespace

MetricsEndpoint::~MetricsEndpoint() {
  tls_.reset();  // no new request reaches the exposer
  if (!exposer_) return;
  std::atomic<bool> stopped{false};
  std::thread knocker([&] { knock_until(served_, stopped); });
  exposer_.reset();
  stopped = true;
  knocker.join();
  if (credentials_) credential_table().erase(served_.port);
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(const job::MetricsConfig& config,
                                                                const std::shared_ptr<prometheus::Collectable>& registry) {
  auto b = parse_http_bind(config.bind);
  if (!b) return b.error();
  auto creds = load_http_credentials(config.token, config.users);
  if (!creds) return creds.error();
  bool local = wire::is_local_endpoint("tcp://" + listen_address(*b));
  if (!local && creds->empty())
    return fail(config.bind, " is reachable from other hosts: refusing to serve the job's numbers to whoever reaches ",
                "it; name a bearer token (metrics.token) or users (metrics.users)");
  std::unique_ptr<MetricsEndpoint> ep(new MetricsEndpoint());
  if (!creds->empty()) ep->credentials_ = std::make_shared<const HttpCredentials>(std::move(*creds));
  // Behind TLS the exposer listens on loopback, on a port of the kernel's choosing.
  const bool tls = !config.tls.empty();
  const HttpBind exposed = tls ? HttpBind{"127.0.0.1", 0} : *b;
  CivetCallbacks callbacks;  // the rest as civetweb-cpp sets them
  callbacks.begin_request = check_credentials;
  try {
    ep->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listen_address(exposed), "num_threads", kServerThreads,
                                 "request_timeout_ms", kRequestTimeoutMs},
        ep->credentials_ ? &callbacks : nullptr);
  } catch (const std::exception&) {
    return fail("cannot listen on ", listen_address(exposed), ": ", why_not_listening(exposed));
  }
  auto ports = ep->exposer_->GetListeningPorts();
  ep->served_ = HttpBind{exposed.host, ports.empty() ? exposed.port : uint16_t(ports.front())};
  if (ep->credentials_) credential_table().set(ep->served_.port, ep->credentials_);
  ep->exposer_->RegisterCollectable(registry);
  HttpBind reached = ep->served_;
  if (tls) {
    auto front = comm::TlsFront::start(*b, config.tls, ep->served_.port);
    if (!front) return front.error().with_context("metrics.tls");
    reached = HttpBind{b->host, (*front)->port()};
    ep->tls_ = std::move(*front);
  }
  ep->url_ = std::string(tls ? "https://" : "http://") + listen_address(reached) + "/metrics";
  ep->local_ = local;
  return ep;
}

}  // namespace sal::metrics

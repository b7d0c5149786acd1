// endpoint.cpp — see endpoint.h.
#include "metrics/endpoint.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/exposer.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/http_bind.h"
#include "mesh/endpoint.h"

namespace sal::metrics {

// civetweb's threads answering scrapes: a Prometheus pair scraping at once is served together, a
// third waits its turn.
constexpr const char* kServerThreads = "2";
// A client that opens a connection and sends no request holds a thread this long at most.
constexpr const char* kRequestTimeoutMs = "5000";
// How often a stopping endpoint is knocked on (knock_until).
constexpr std::chrono::milliseconds kKnockEvery{2};

namespace {

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
  if (!exposer_) return;
  std::atomic<bool> stopped{false};
  std::thread knocker([&] { knock_until(bound_, stopped); });
  exposer_.reset();
  stopped = true;
  knocker.join();
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(const std::string& bind,
                                                                const std::shared_ptr<prometheus::Collectable>& registry) {
  auto b = parse_http_bind(bind);
  if (!b) return b.error();
  std::unique_ptr<MetricsEndpoint> ep(new MetricsEndpoint());
  try {
    ep->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen_address(*b), "num_threads", kServerThreads, "request_timeout_ms", kRequestTimeoutMs});
  } catch (const std::exception&) {
    return fail("cannot listen on ", listen_address(*b), ": ", why_not_listening(*b));
  }
  ep->exposer_->RegisterCollectable(registry);
  auto ports = ep->exposer_->GetListeningPorts();
  ep->bound_ = HttpBind{b->host, ports.empty() ? b->port : uint16_t(ports.front())};
  ep->url_ = "http://" + listen_address(ep->bound_) + "/metrics";
  ep->local_ = mesh::is_local_endpoint("tcp://" + listen_address(ep->bound_));
  return ep;
}

}  // namespace sal::metrics

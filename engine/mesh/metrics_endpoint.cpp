// metrics_endpoint.cpp — see metrics_endpoint.h.
#include "mesh/metrics_endpoint.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/exposer.h>

#include <cerrno>
#include <cstring>

#include "core/http_bind.h"
#include "mesh/endpoint.h"

namespace sal::mesh {

// civetweb's threads answering scrapes: a Prometheus pair scraping at once is served together, a
// third waits its turn.
constexpr const char* kServerThreads = "2";
// A client that opens a connection and sends no request holds a thread this long at most.
constexpr const char* kRequestTimeoutMs = "5000";

namespace {

// Why `b` cannot be listened on, as bind(2) says it: civetweb only reports that it failed.
std::string why_not_listening(const HttpBind& b) {
  std::string host = b.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(b.port).c_str(), &hints, &found); rc != 0)
    return std::string("the host is not an address here (") + gai_strerror(rc) + ")";
  std::string why = "the HTTP server did not start";
  int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

MetricsEndpoint::~MetricsEndpoint() = default;

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
  HttpBind bound{b->host, ports.empty() ? b->port : uint16_t(ports.front())};
  ep->url_ = "http://" + listen_address(bound) + "/metrics";
  ep->local_ = is_local_endpoint("tcp://" + listen_address(bound));
  return ep;
}

}  // namespace sal::mesh

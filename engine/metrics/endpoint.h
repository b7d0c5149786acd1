// endpoint.h — the controller's Prometheus endpoint: plain HTTP, `GET /metrics` answers
// the registry (export.h) in the text exposition format. It listens where metrics.bind
// says (core/http_bind.h) and is served by civetweb's threads through prometheus-cpp's Exposer —
// never by the controller's loop, which only sets the registry's values, so a slow or stuck
// scraper cannot stall training (a client that sends nothing is dropped after kRequestTimeoutMs).
// It answers only reads; it is not authenticated, so beyond loopback whoever reaches the port
// reads the job's numbers (docs/operations.md).
#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <string>

#include "core/http_bind.h"
#include "core/result.h"

namespace prometheus {
class Exposer;
}

namespace sal::metrics {

class MetricsEndpoint {
 public:
  // Binds `bind` (tcp://HOST:PORT, PORT * for any free one, or a bare PORT on loopback) and serves
  // `registry` at /metrics. The error says why it could not listen ("cannot listen on
  // 127.0.0.1:9464: Address already in use").
  static Result<std::unique_ptr<MetricsEndpoint>> start(const std::string& bind,
                                                        const std::shared_ptr<prometheus::Collectable>& registry);
  // Stops serving and frees the port at once (a scrape in progress is finished first).
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "http://127.0.0.1:40123/metrics": with the port actually bound.
  const std::string& url() const { return url_; }
  // Reachable from this host only (127.x, localhost, [::1]).
  bool local() const { return local_; }

 private:
  MetricsEndpoint() = default;

  std::unique_ptr<prometheus::Exposer> exposer_;
  HttpBind bound_;  // with the port actually bound
  std::string url_;
  bool local_ = true;
};

}  // namespace sal::metrics

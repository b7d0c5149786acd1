// endpoint.h — the controller's Prometheus endpoint: plain HTTP, `GET /metrics` answers
// the registry (export.h) in the text exposition format. It listens where metrics.bind
// says (core/http_bind.h) and is served by civetweb's threads through prometheus-cpp's Exposer —
// never by the controller's loop, which only sets the registry's values, so a slow or stuck
// scraper cannot stall training (a client that sends nothing is dropped after kRequestTimeoutMs).
// It answers only reads. With metrics.token or metrics.users it answers only requests that carry
// the token (`Authorization: Bearer`) or a listed user's password (`Basic`), 401 otherwise;
// bound beyond loopback without either, it refuses to start. With metrics.tls it serves HTTPS: the
// HTTP server then listens on loopback only, behind comm/tls_front.h (docs/operations.md).
#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <string>

#include "core/http_auth.h"
#include "core/http_bind.h"
#include "core/result.h"
#include "job/config.h"

namespace prometheus {
class Exposer;
}
namespace sal::comm {
class TlsFront;
}

namespace sal::metrics {

class MetricsEndpoint {
 public:
  // Binds `config.bind` (tcp://HOST:PORT, PORT * for any free one, or a bare PORT on loopback) and
  // serves `registry` at /metrics, to the holders of config.token's token or config.users' users
  // when either is set. The error says why it could not listen ("cannot listen on 127.0.0.1:9464:
  // Address already in use"), or why it would not (beyond loopback without credentials).
  static Result<std::unique_ptr<MetricsEndpoint>> start(const job::MetricsConfig& config,
                                                        const std::shared_ptr<prometheus::Collectable>& registry);
  // Stops serving and frees the port at once (a scrape in progress is finished first).
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "http://127.0.0.1:40123/metrics" (https:// with metrics.tls): with the port actually bound.
  const std::string& url() const { return url_; }
  // Reachable from this host only (127.x, localhost, [::1]).
  bool local() const { return local_; }

 private:
  MetricsEndpoint() = default;

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<comm::TlsFront> tls_;  // HTTPS in front of the exposer (metrics.tls)
  std::shared_ptr<const HttpCredentials> credentials_;  // null: anyone on loopback may read
  HttpBind served_;  // where the exposer listens, with the port actually bound
  std::string url_;
  bool local_ = true;
};

}  // namespace sal::metrics

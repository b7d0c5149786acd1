// tls_front.h — HTTPS in front of a plain HTTP server that listens on loopback: the controller's
// Prometheus endpoint with metrics.tls. The HTTP server there is prometheus-cpp's civetweb, and
// Debian 12's civetweb (1.15, built for OpenSSL 1.1) cannot start TLS with the system's OpenSSL 3
// (it looks up SSL_get_peer_certificate, which libssl.so.3 no longer exports), so the engine does
// the TLS itself, with OpenSSL: a front listens where the operator said, completes each handshake
// with the certificate chain and private key of a PEM file, and relays the request to the server
// on loopback and its answer back — one request per connection (it asks the server to close
// after answering). Two threads serve connections, a third accepts them; a client that is slow to
// handshake, send or read is dropped after kIoTimeoutMs, and connections past kQueuedMax waiting
// for a thread are closed at once, so no client holds the front for longer than that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/http_bind.h"
#include "core/result.h"

namespace sal::comm {

class TlsFront {
 public:
  // Listens on `bind` (port 0: any free one) with the certificate chain and key in `pem_file`,
  // relaying to http://127.0.0.1:`backend_port`. The error says why it cannot (the file, the key,
  // the address).
  static Result<std::unique_ptr<TlsFront>> start(const HttpBind& bind, const std::string& pem_file,
                                                 uint16_t backend_port);
  ~TlsFront();  // stops accepting and waits for the connections in progress (each bounded)
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  uint16_t port() const;  // the port actually bound

  struct Impl;

 private:
  explicit TlsFront(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sal::comm

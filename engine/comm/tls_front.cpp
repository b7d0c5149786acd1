// tls_front.cpp — see tls_front.h.
#include "comm/tls_front.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/lifetime.h"
#include "core/strings.h"

namespace sal::comm {
namespace {

// A client that does not complete a handshake, send its request or read the answer within this
// long (for each step) is dropped: the front's threads are never held longer.
constexpr int kIoTimeoutMs = 5000;
// Threads answering connections (a Prometheus pair scraping at once is served together), and the
// connections that may wait for one; more are closed at once.
constexpr int kWorkers = 2;
constexpr size_t kQueuedMax = 16;
// A scrape's request is a line and a few headers.
constexpr size_t kRequestMax = 16u << 10;
// How often the accepting thread looks whether it should stop.
constexpr int kAcceptPollMs = 100;

std::string ssl_error() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

void set_timeouts(int fd) {
  timeval tv{kIoTimeoutMs / 1000, (kIoTimeoutMs % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// The request with its Connection header replaced by "close": the server answers once and hangs up,
// which is when the relay knows the answer is over.
std::string closing(const std::string& request) {
  size_t head_end = request.find("\r\n\r\n");
  std::string head = request.substr(0, head_end), out;
  size_t at = 0;
  while (at <= head.size()) {
    size_t eol = head.find("\r\n", at);
    std::string line = head.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    if (to_lower(line).rfind("connection:", 0) != 0) out += line + "\r\n";
    if (eol == std::string::npos) break;
    at = eol + 2;
  }
  return out + "Connection: close\r\n\r\n";
}

int connect_backend(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  set_timeouts(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The request's head from the TLS client, at most kRequestMax; empty when it did not come whole.
std::string read_request(SSL* ssl) {
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < kRequestMax) {
    int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) return {};
    req.append(buf, size_t(n));
  }
  return req.find("\r\n\r\n") == std::string::npos ? std::string() : req;
}

// Copies the server's answer to the client until the server hangs up.
void relay_answer(int backend, SSL* ssl) {
  char buf[16384];
  ssize_t n;
  while ((n = recv(backend, buf, sizeof buf, 0)) > 0)
    if (SSL_write(ssl, buf, int(n)) <= 0) return;
}

}  // namespace

struct TlsFront::Impl {
  SSL_CTX* ctx = nullptr;
  int listen_fd = -1;
  uint16_t port = 0, backend = 0;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> queued;  // accepted connections waiting for a worker
  std::vector<int> active; // connections being served (shut down when the front stops)
  std::thread acceptor;
  std::vector<std::thread> workers;

  ~Impl() {
    stop = true;
    {
      std::lock_guard lock(mu);
      for (int fd : active) shutdown(fd, SHUT_RDWR);  // a connection in progress ends now
    }
    cv.notify_all();
    if (acceptor.joinable()) acceptor.join();
    for (auto& t : workers)
      if (t.joinable()) t.join();
    for (int fd : queued) close(fd);
    if (listen_fd >= 0) close(listen_fd);
    if (ctx) SSL_CTX_free(ctx);
  }

  void accept_loop() {
    block_signals_in_this_thread();
    while (!stop) {
      pollfd p{listen_fd, POLLIN, 0};
      if (poll(&p, 1, kAcceptPollMs) <= 0) continue;
      int fd = accept(listen_fd, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard lock(mu);
      if (queued.size() >= kQueuedMax) {
        close(fd);
        continue;
      }
      queued.push_back(fd);
      cv.notify_one();
    }
  }

  // Signals are blocked here: a write to a client that went away is EPIPE, not SIGPIPE.
  void work_loop() {
    block_signals_in_this_thread();
    for (;;) {
      int fd;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || !queued.empty(); });
        if (stop) return;
        fd = queued.front();
        queued.pop_front();
        active.push_back(fd);
      }
      serve(fd);
      std::lock_guard lock(mu);
      active.erase(std::find(active.begin(), active.end(), fd));
      close(fd);
    }
  }

  void serve(int fd) {
    set_timeouts(fd);
    SSL* ssl = SSL_new(ctx);
    if (!ssl) return;
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      std::string req = read_request(ssl);
      int backend_fd = req.empty() ? -1 : connect_backend(backend);
      if (backend_fd >= 0) {
        std::string forward = closing(req);
        if (send(backend_fd, forward.data(), forward.size(), MSG_NOSIGNAL) == ssize_t(forward.size()))
          relay_answer(backend_fd, ssl);
        close(backend_fd);
      }
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
  }
};

namespace {

Status load_identity(SSL_CTX* ctx, const std::string& pem_file) {
  if (SSL_CTX_use_certificate_chain_file(ctx, pem_file.c_str()) != 1)
    return fail(pem_file, ": no certificate (chain) in it: ", ssl_error());
  if (SSL_CTX_use_PrivateKey_file(ctx, pem_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return fail(pem_file, ": no private key in it: ", ssl_error());
  if (SSL_CTX_check_private_key(ctx) != 1) return fail(pem_file, ": the private key is not the certificate's");
  return {};
}

Result<int> listen_on(const HttpBind& bind, uint16_t& port) {
  std::string host = bind.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(bind.port).c_str(), &hints, &found); rc != 0)
    return fail("the host is not an address here (", gai_strerror(rc), ")");
  int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool ok = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 64) == 0;
  int err = errno;
  freeaddrinfo(found);
  if (!ok) {
    if (fd >= 0) close(fd);
    return fail(std::strerror(err));
  }
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return fd;
}

}  // namespace

TlsFront::TlsFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsFront::~TlsFront() = default;

uint16_t TlsFront::port() const { return impl_->port; }

Result<std::unique_ptr<TlsFront>> TlsFront::start(const HttpBind& bind, const std::string& pem_file,
                                                  uint16_t backend_port) {
  auto impl = std::make_unique<Impl>();
  impl->backend = backend_port;
  impl->ctx = SSL_CTX_new(TLS_server_method());
  if (!impl->ctx) return fail("cannot make a TLS context: ", ssl_error());
  SSL_CTX_set_min_proto_version(impl->ctx, TLS1_2_VERSION);
  SAL_TRY(load_identity(impl->ctx, pem_file));
  auto fd = listen_on(bind, impl->port);
  if (!fd) return fail("cannot listen on ", listen_address(bind), ": ", fd.error().message());
  impl->listen_fd = *fd;
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->accept_loop(); });
  for (int i = 0; i < kWorkers; ++i) impl->workers.emplace_back([raw] { raw->work_loop(); });
  return std::unique_ptr<TlsFront>(new TlsFront(std::move(impl)));
}

}  // namespace sal::comm

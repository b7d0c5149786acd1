// client.h — the REPL client's connection to a controller: hello, eval, complete, bye over a
// DEALER socket (CURVE when the endpoint is not local). On a local endpoint the hello carries the
// job's token (wire/repl_token.h): from the file given, else from this user's runtime directory —
// and this process's working directory, which the session's policy.load reads relative paths against.
// Used by `salamander repl` and by the integration tests, which drive a live controller exactly as
// an operator does.
#pragma once

#include <zmq.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "wire/codec.h"

namespace sal::repl {

struct ClientOptions {
  std::string endpoint;
  std::string server_public_key;  // CURVE: the controller's public key (Z85)
  std::string key_file;           // CURVE: our key pair
  int64_t timeout_ms = 0;         // per request; 0: the server's budget + 5 s
  std::string token_file;         // without CURVE: the job's token (empty: the runtime directory's)
};

class Client {
 public:
  explicit Client(ClientOptions opts);
  ~Client();

  // Connects and says hello; fails with a clear message if nobody answers in time.
  Result<wire::ReplWelcome> connect();
  Result<wire::ReplResult> eval(const std::string& chunk, wire::ValueFormat format = wire::ValueFormat::text);
  Result<std::vector<std::string>> complete(const std::string& line);
  void bye();

  // Sends arbitrary frames (tests use it to forge bad input) and waits for one reply.
  Result<wire::Parts> raw_request(wire::Parts frames, int64_t timeout_ms);

 private:
  Result<wire::ReplHello> hello();
  template <class Req, class Rep>
  Result<Rep> request(const Req& req);
  Result<wire::Parts> receive(int64_t timeout_ms);

  ClientOptions opts_;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  uint64_t next_id_ = 1;
  int64_t budget_ms_ = 0;
};

// Whether `chunk` is a complete Lua chunk (as an expression or as statements), an incomplete one
// that needs more lines, or a syntax error (with its message) — the console's multi-line test.
enum class ChunkState { complete, incomplete, error };
ChunkState check_chunk(const std::string& chunk, std::string* error = nullptr);

}  // namespace sal::repl

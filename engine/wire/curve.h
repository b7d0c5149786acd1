// curve.h — CURVE key files and socket settings, shared by the controller (server side) and by
// agents and REPL clients (client side). Keys are Z85 text: NAME.key holds both keys (mode 0600),
// NAME.pub only the public one.
#pragma once

#include <zmq.hpp>

#include <functional>
#include <string>

#include "core/result.h"

namespace sal::wire {

struct KeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters (empty for a public-only file)
};

// True for a 40-character Z85 string that decodes to a 32-byte key.
bool valid_z85_key(const std::string& k);

// Generates a key pair; writes NAME.key (0600, both keys) and NAME.pub (public key only).
Result<KeyPair> generate_key_files(const std::string& base);
// Reads "public-key = ..." / "secret-key = ..." lines (either file kind).
Result<KeyPair> load_key_file(const std::string& path);
// The same from the file's text; `path` names it in errors.
Result<KeyPair> parse_key_file(const std::string& text, const std::string& path);

// tcp://127.x.y.z, tcp://localhost, tcp://[::1], ipc://, inproc:// — reachable from this host only
// (whoever reaches them already owns the machine). Every other endpoint needs CURVE.
bool is_local_endpoint(const std::string& endpoint);

// A socket's options before it binds or connects, as a hook (StoreServerOptions::configure ...).
using SocketHook = std::function<Status(zmq::socket_t&)>;

// For a server bound to `endpoint`: nothing when it is local; CURVE with `server` on ZAP `domain`
// otherwise — and an error, naming the endpoint, when there is no key to do it with.
SocketHook curve_server_hook(const std::string& endpoint, const KeyPair* server, const char* domain);
// For a client of `endpoint`: nothing when it is local; CURVE with the server's public key and the
// key pair in `key_file` otherwise — an error, naming the endpoint, without them.
SocketHook curve_client_hook(const std::string& endpoint, const std::string& server_public, const std::string& key_file);

// Server side: CURVE on, secret key, ZAP domain.
void make_curve_server(zmq::socket_t& s, const KeyPair& server, const char* domain);
// Client side: the server's public key and our own pair.
void make_curve_client(zmq::socket_t& s, const std::string& server_public, const KeyPair& own);

}  // namespace sal::wire

namespace sal::wire {

// A public key given on a command line: the Z85 key itself, or a file holding "public-key = ...".
Result<std::string> resolve_public_key(const std::string& key_or_file);

}  // namespace sal::wire

// repl_token.h — the token a REPL session on a local endpoint presents. Loopback and ipc endpoints
// are reachable by every account on the machine, so a controller whose REPL is not CURVE makes a
// random token when it starts and writes it where only its user can read it (mode 0600): the run
// directory's repl.token, and the user's runtime directory under a name made from the endpoint.
// A local session is opened only by a ReplHello carrying it; `salamander repl` (and every client
// of this library) finds it in the runtime directory by the endpoint, or is given the file.
#pragma once

#include <string>

#include "core/result.h"

namespace sal::wire {

// 32 random bytes from the kernel, as 64 hex characters.
Result<std::string> make_repl_token();

// Where the token of the controller whose REPL is `endpoint` lies in the runtime directory `dir`:
// dir/repl-<endpoint with every character but letters and digits as '-'>.token.
std::string repl_token_path(const std::string& dir, const std::string& endpoint);

// The token in `path` (surrounding whitespace dropped); an error naming the file if it cannot be
// read or holds no token.
Result<std::string> read_repl_token(const std::string& path);

// The token of `endpoint` from this user's runtime directory; empty if there is none.
std::string find_repl_token(const std::string& endpoint);

// Whether two tokens are equal, in time that does not depend on where they differ.
bool same_token(const std::string& a, const std::string& b);

}  // namespace sal::wire

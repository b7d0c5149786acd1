// host_link.h — the link between `salamander run` and a controller it hosts as a child process
// (cli/hosted_run.h). The controller writes requests to its host, one line each, on a pipe the host
// hands it as a file descriptor (`controller --host-fd FD`): "add N" starts N more agents (a drill's
// add), "restart MS" SIGKILLs the controller and starts `controller --resume` MS milliseconds later
// (a drill's kill{controller = true}), "cut NODE MS" cuts the link of the agent named NODE for MS
// milliseconds (a drill's partition{}, where the run put its mesh in network namespaces). There are no replies: the host acts, and the controller — or
// the one that replaces it — sees the effect on its mesh.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/result.h"

namespace sal::cli {

struct HostRequest {
  enum class Kind { add, restart, cut };
  Kind kind = Kind::add;
  int64_t value = 0;  // agents to add, or milliseconds (before the restart; of the cut)
  std::string node;   // cut: the agent's name (no spaces)
};

std::string encode_host_request(const HostRequest& r);  // one line, without the newline
Result<HostRequest> decode_host_request(const std::string& line);

// The controller's end: a blocking write of one line (a few bytes: a pipe takes it at once).
Status send_host_request(int fd, const HostRequest& r);

// The host's end: reads the pipe on the loop and hands each line, decoded, to `on_request`
// (a line that does not decode is handed over as its error).
class HostListener {
 public:
  using OnRequest = std::function<void(Result<HostRequest>)>;
  HostListener(uv_loop_t* loop, OnRequest on_request) : loop_(loop), on_request_(std::move(on_request)) {}
  ~HostListener();
  HostListener(const HostListener&) = delete;
  HostListener& operator=(const HostListener&) = delete;

  // Starts reading `fd` (the pipe's read end; the listener owns it from here).
  Status start(int fd);

 private:
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);
  void take(const char* data, size_t n);

  uv_loop_t* loop_;
  OnRequest on_request_;
  uv_pipe_t* pipe_ = nullptr;  // freed by its close callback
  std::string pending_;        // a line not yet ended
};

}  // namespace sal::cli

// loopback.h — raw TCP on 127.0.0.1 for tests: a port held by a listening socket (to see what a
// program does when its port is taken), and a connection to a port (to send bytes a client would
// not, or nothing at all).
#pragma once

namespace sal::test {

// Listens on 127.0.0.1, on a free port, until destroyed.
class LoopbackListener {
 public:
  LoopbackListener();
  ~LoopbackListener();
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A connected TCP socket to 127.0.0.1:port (the caller closes it); -1 if the connection failed.
int connect_loopback(int port);

}  // namespace sal::test

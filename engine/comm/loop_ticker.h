// loop_ticker.h — makes a Gloo TCP device's I/O loop tick at once while a connect or a context's
// teardown waits for it.
//
// Gloo's loop thread wakes from epoll_wait on an event or after 10 ms, and unregistering a socket
// from it — what a pair does when it connects out to its peer, and again when it closes — waits for
// the loop's next tick (so the loop is known to be done with the socket). On a quiet device each
// such wait is an idle tick of up to 10 ms: a full-mesh connect pays about one per pair on its
// connecting side, a context's destruction one per open pair, one after the other. That was most of
// a plan switch's data-plane rebuild.
//
// A LoopTicker registers an eventfd with the device's loop (tcp::Device::registerDescriptor, public
// API). While a Ticking scope is alive, a thread writes to the eventfd every kTickEveryUs, so the
// loop ticks that often and each such wait ends within about that. Outside the scopes nothing
// happens: no thread, no wake-ups.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "core/result.h"

namespace gloo::transport {
class Device;
}

namespace sal::comm {

class LoopTicker {
 public:
  // Attaches to a TCP device (created by gloo::transport::tcp::CreateDevice).
  static Result<std::unique_ptr<LoopTicker>> attach(const std::shared_ptr<gloo::transport::Device>& device);
  ~LoopTicker();  // unregisters (one tick of the loop)
  LoopTicker(const LoopTicker&) = delete;
  LoopTicker& operator=(const LoopTicker&) = delete;

  // While alive, the loop ticks every kTickEveryUs. Scopes may overlap (from any threads).
  class Ticking {
   public:
    explicit Ticking(LoopTicker* t);
    ~Ticking();
    Ticking(const Ticking&) = delete;
    Ticking& operator=(const Ticking&) = delete;

   private:
    LoopTicker* t_;
  };
  Ticking ticking() { return Ticking(this); }

 private:
  class Handler;
  LoopTicker(std::shared_ptr<gloo::transport::Device> device, int fd);
  void start();
  void stop();
  void poke() const;

  std::shared_ptr<gloo::transport::Device> device_;
  int fd_ = -1;
  std::unique_ptr<Handler> handler_;
  std::mutex mu_;
  int scopes_ = 0;  // under mu_
  std::atomic<bool> run_{false};
  std::thread thread_;
};

}  // namespace sal::comm

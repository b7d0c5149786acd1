// loop_ticker.cpp — see loop_ticker.h.
#include "comm/loop_ticker.h"

#include <gloo/transport/tcp/device.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace sal::comm {

// How often the loop is woken while someone waits for it: far below Gloo's 10 ms idle tick, far
// above what the wake-ups cost (a connect lasts a few milliseconds).
constexpr int kTickEveryUs = 200;

// Drains the eventfd when the loop reports it readable.
class LoopTicker::Handler final : public gloo::transport::tcp::Handler {
 public:
  explicit Handler(int fd) : fd_(fd) {}
  void handleEvents(int) override {
    uint64_t n = 0;
    while (::read(fd_, &n, sizeof n) == ssize_t(sizeof n)) {
    }
  }

 private:
  int fd_;
};

Result<std::unique_ptr<LoopTicker>> LoopTicker::attach(const std::shared_ptr<gloo::transport::Device>& device) {
  auto tcp = std::dynamic_pointer_cast<gloo::transport::tcp::Device>(device);
  if (!tcp) return fail("not a Gloo TCP device");
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return fail("eventfd: ", std::strerror(errno));
  std::unique_ptr<LoopTicker> t(new LoopTicker(device, fd));
  try {
    tcp->registerDescriptor(fd, EPOLLIN, t->handler_.get());
  } catch (const std::exception& e) {
    return fail("registering an eventfd with the Gloo device's loop: ", e.what());
  }
  return t;
}

LoopTicker::LoopTicker(std::shared_ptr<gloo::transport::Device> device, int fd)
    : device_(std::move(device)), fd_(fd), handler_(std::make_unique<Handler>(fd)) {}

LoopTicker::~LoopTicker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    scopes_ = 0;
  }
  stop();
  try {
    std::static_pointer_cast<gloo::transport::tcp::Device>(device_)->unregisterDescriptor(fd_, handler_.get());
  } catch (...) {
  }
  ::close(fd_);
}

void LoopTicker::poke() const {
  const uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof one);
}

void LoopTicker::start() {
  run_ = true;
  thread_ = std::thread([this] {
    while (run_.load()) {
      poke();
      std::this_thread::sleep_for(std::chrono::microseconds(kTickEveryUs));
    }
  });
}

void LoopTicker::stop() {
  run_ = false;
  if (thread_.joinable()) thread_.join();
}

LoopTicker::Ticking::Ticking(LoopTicker* t) : t_(t) {
  if (!t_) return;
  std::lock_guard<std::mutex> lock(t_->mu_);
  if (t_->scopes_++ == 0) t_->start();
}

LoopTicker::Ticking::~Ticking() {
  if (!t_) return;
  std::lock_guard<std::mutex> lock(t_->mu_);
  if (--t_->scopes_ == 0) t_->stop();
}

}  // namespace sal::comm

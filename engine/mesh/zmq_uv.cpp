// zmq_uv.cpp — see zmq_uv.h.
#include "mesh/zmq_uv.h"

#include <cerrno>

#include <spdlog/spdlog.h>

namespace sal::mesh {

// Messages handled per loop turn before yielding to other handles (timers, other sockets).
constexpr int kBatchPerTurn = 256;

struct ZmqWatcher::Handles {
  uv_poll_t poll;
  uv_prepare_t prepare;
  uv_check_t check;
  uv_idle_t idle;
  int open = 4;
  ZmqWatcher* owner = nullptr;
};

namespace {

void noop_poll(uv_poll_t*, int, int) {}
void noop_idle(uv_idle_t*) {}

void on_closed(uv_handle_t* h) {
  auto* hs = static_cast<ZmqWatcher::Handles*>(h->data);
  if (--hs->open == 0) delete hs;
}

}  // namespace

ZmqWatcher::ZmqWatcher(uv_loop_t* loop, zmq::socket_t& socket, std::function<void()> on_message)
    : socket_(socket), on_message_(std::move(on_message)), h_(new Handles) {
  h_->owner = this;
  int fd = socket_.get(zmq::sockopt::fd);
  uv_poll_init(loop, &h_->poll, fd);
  uv_prepare_init(loop, &h_->prepare);
  uv_check_init(loop, &h_->check);
  uv_idle_init(loop, &h_->idle);
  for (uv_handle_t* hd : {(uv_handle_t*)&h_->poll, (uv_handle_t*)&h_->prepare,
                          (uv_handle_t*)&h_->check, (uv_handle_t*)&h_->idle})
    hd->data = h_;
  uv_poll_start(&h_->poll, UV_READABLE, noop_poll);
  uv_prepare_start(&h_->prepare, on_prepare);
  uv_check_start(&h_->check, on_check);
}

ZmqWatcher::~ZmqWatcher() {
  h_->owner = nullptr;
  for (uv_handle_t* hd : {(uv_handle_t*)&h_->poll, (uv_handle_t*)&h_->prepare,
                          (uv_handle_t*)&h_->check, (uv_handle_t*)&h_->idle})
    uv_close(hd, on_closed);
}

namespace {

// libzmq reports EINTR when a signal (SIGCHLD, as children come and go) lands while it processes
// its internal commands, even on non-blocking calls: those are simply tried again.
template <class F>
auto again_on_eintr(F f) {
  for (;;) {
    try {
      return f();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

}  // namespace

bool ZmqWatcher::readable() const {
  return again_on_eintr([this] { return (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0; });
}

void ZmqWatcher::on_prepare(uv_prepare_t* h) {
  auto* hs = static_cast<Handles*>(h->data);
  if (!hs->owner) return;
  if (hs->owner->readable()) {
    uv_idle_start(&hs->idle, noop_idle);  // keeps the loop from blocking in poll
  }
}

void ZmqWatcher::on_check(uv_check_t* h) {
  auto* hs = static_cast<Handles*>(h->data);
  uv_idle_stop(&hs->idle);
  if (!hs->owner) return;
  ZmqWatcher* self = hs->owner;
  for (int i = 0; i < kBatchPerTurn && hs->owner == self && self->readable(); ++i)
    self->on_message_();
}

void ZmqWatcher::drain() {
  if (draining_) return;  // a handler that triggers a drain must not recurse
  draining_ = true;
  while (readable()) on_message_();
  draining_ = false;
}

bool recv_now(zmq::socket_t& socket, std::vector<zmq::message_t>& parts) {
  return again_on_eintr([&] {
    parts.clear();
    return zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait).has_value();
  });
}

}  // namespace sal::mesh

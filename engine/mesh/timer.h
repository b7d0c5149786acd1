// timer.h — a libuv timer owned like a C++ object: the handle is closed on destruction and freed
// by its close callback, and the callback is a std::function.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>

namespace sal::mesh {

class Timer {
 public:
  explicit Timer(uv_loop_t* loop) : h_(new Handle) {
    uv_timer_init(loop, &h_->timer);
    h_->timer.data = h_;
  }
  ~Timer() {
    uv_timer_stop(&h_->timer);
    h_->fn = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&h_->timer),
             [](uv_handle_t* t) { delete static_cast<Handle*>(t->data); });
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // First call after `timeout_ms`, then every `repeat_ms` (0: once).
  void start(uint64_t timeout_ms, uint64_t repeat_ms, std::function<void()> fn) {
    h_->fn = std::move(fn);
    uv_timer_start(&h_->timer, [](uv_timer_t* t) {
      auto* h = static_cast<Handle*>(t->data);
      if (h->fn) h->fn();
    }, timeout_ms, repeat_ms);
  }
  void stop() { uv_timer_stop(&h_->timer); }

 private:
  struct Handle {
    uv_timer_t timer;
    std::function<void()> fn;
  };
  Handle* h_;
};

}  // namespace sal::mesh
